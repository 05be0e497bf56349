// Bearer-key comparison (see bearer.h).
#include "server/bearer.h"

namespace shoal::server {

namespace {

// Constant-time comparison, so the key cannot be guessed byte by byte from response timing.
bool SameKey(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

}  // namespace

bool BearerMatches(const HttpRequest& req, const std::string& key) {
  const std::string auth = req.Header("authorization");
  const std::string prefix = "Bearer ";
  return auth.rfind(prefix, 0) == 0 && SameKey(auth.substr(prefix.size()), key);
}

}  // namespace shoal::server
