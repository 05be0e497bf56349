// The "Authorization: Bearer KEY" check every HTTP front door of Shoal makes (`shoal serve`,
// `shoal router`), in constant time so a key cannot be guessed byte by byte from timing.
#pragma once

#include <string>

#include "server/http.h"

namespace shoal::server {

// The request's bearer key equals `key`.
bool BearerMatches(const HttpRequest& req, const std::string& key);

}  // namespace shoal::server
