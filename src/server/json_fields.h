// Safe JSON intake for the API: parsing that never throws or recurses without bound, and typed,
// range-checked field readers that name the field in their errors.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace shoal::server {

using Json = nlohmann::json;

// Deepest nesting accepted; real requests use 4-6 levels (messages -> content parts), and the
// limit keeps recursive destruction of hostile documents shallow.
inline constexpr int kMaxJsonDepth = 64;

// Parses a request body: must be a JSON object; rejects bad syntax, invalid UTF-8 and nesting
// deeper than kMaxJsonDepth.
Result<Json> ParseJsonObject(const std::string& body);

// Dumps with invalid UTF-8 replaced (never throws).
std::string DumpJson(const Json& j);

// Field readers: absent or null -> nullopt; wrong type or out of range -> error naming `key`.
Result<std::optional<bool>> GetBool(const Json& obj, const char* key);
Result<std::optional<int64_t>> GetInt(const Json& obj, const char* key, int64_t lo, int64_t hi);
Result<std::optional<double>> GetNumber(const Json& obj, const char* key, double lo, double hi);
Result<std::optional<std::string>> GetString(const Json& obj, const char* key);
// A string or a list of strings (e.g. "stop").
Result<std::vector<std::string>> GetStringOrList(const Json& obj, const char* key,
                                                 size_t max_items);

}  // namespace shoal::server
