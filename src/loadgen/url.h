// Parsing the server address of `shoal bench serve --url`.
#pragma once

#include <string>

#include "base/status.h"

namespace shoal::loadgen {

struct Url {
  std::string host;  // name, IPv4 literal, or IPv6 literal without brackets
  std::string port;  // "80" when the URL names none
  std::string path;  // path prefix without a trailing '/', possibly empty ("/proxy")
};

// http://host[:port][/path]. https is refused (no TLS client here: put the benchmark on the
// plain-HTTP side of the proxy).
Result<Url> ParseUrl(const std::string& url);

}  // namespace shoal::loadgen
