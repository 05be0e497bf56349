// Server URL parsing (see url.h).
#include "loadgen/url.h"

#include <cctype>

namespace shoal::loadgen {

Result<Url> ParseUrl(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  std::string_view s = url;
  if (s.rfind("https://", 0) == 0)
    return Errorf("{}: https is not supported; give the server's plain http:// address", url);
  if (s.rfind(kScheme, 0) != 0) return Errorf("{}: the URL must start with http://", url);
  s.remove_prefix(kScheme.size());
  const size_t slash = s.find('/');
  std::string_view authority = s.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : s.substr(slash);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  Url u;
  u.path = std::string(path);
  u.port = "80";
  if (authority.find('@') != std::string_view::npos)
    return Errorf("{}: credentials in the URL are not supported; use --api-key", url);
  if (!authority.empty() && authority.front() == '[') {  // [::1]:8000
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Errorf("{}: unterminated IPv6 address", url);
    u.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty()) {
      if (authority.front() != ':') return Errorf("{}: expected ':port' after ']'", url);
      u.port = std::string(authority.substr(1));
    }
  } else {
    const size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) u.port = std::string(authority.substr(colon + 1));
  }
  if (u.host.empty()) return Errorf("{}: no host", url);
  if (u.port.empty() || u.port.size() > 5) return Errorf("{}: bad port", url);
  for (char c : u.port)
    if (!std::isdigit(static_cast<unsigned char>(c))) return Errorf("{}: bad port", url);
  if (std::stoi(u.port) < 1 || std::stoi(u.port) > 65535) return Errorf("{}: bad port", url);
  return u;
}

}  // namespace shoal::loadgen
