// Safe JSON parsing and typed field readers.
#include "server/json_fields.h"

#include <cmath>

namespace shoal::server {

namespace {

// Nesting depth of brackets outside strings (a cheap pass before the real parse).
int MaxDepth(const std::string& s) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escape = false;
  for (char c : s) {
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

Result<Json> ParseJsonObject(const std::string& body) {
  if (MaxDepth(body) > kMaxJsonDepth)
    return Errorf("JSON nested deeper than {} levels", kMaxJsonDepth);
  Json j;
  try {
    j = Json::parse(body);
  } catch (const Json::exception& e) {
    return Errorf("invalid JSON body: {}", e.what());
  }
  if (!j.is_object()) return Errorf("the request body must be a JSON object");
  return j;
}

std::string DumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<std::optional<bool>> GetBool(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return Errorf("'{}' must be a boolean", key);
  return std::optional<bool>(it->get<bool>());
}

Result<std::optional<int64_t>> GetInt(const Json& obj, const char* key, int64_t lo, int64_t hi) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number()) return Errorf("'{}' must be an integer", key);
  int64_t v = 0;
  if (it->is_number_float()) {
    const double d = it->get<double>();
    // Integral floats (e.g. 16.0) are accepted as Python clients sometimes send them.
    if (!std::isfinite(d) || d != std::floor(d) || d < -9.0e18 || d > 9.0e18)
      return Errorf("'{}' must be an integer", key);
    v = static_cast<int64_t>(d);
  } else if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return Errorf("'{}' is out of range", key);
    v = static_cast<int64_t>(u);
  } else {
    v = it->get<int64_t>();
  }
  if (v < lo || v > hi) return Errorf("'{}' must be between {} and {}, got {}", key, lo, hi, v);
  return std::optional<int64_t>(v);
}

Result<std::optional<double>> GetNumber(const Json& obj, const char* key, double lo, double hi) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number()) return Errorf("'{}' must be a number", key);
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    return Errorf("'{}' must be between {} and {}", key, lo, hi);
  return std::optional<double>(v);
}

Result<std::optional<std::string>> GetString(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return Errorf("'{}' must be a string", key);
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::vector<std::string>> GetStringOrList(const Json& obj, const char* key,
                                                 size_t max_items) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (it->is_string()) {
    out.push_back(it->get<std::string>());
    return out;
  }
  if (!it->is_array()) return Errorf("'{}' must be a string or a list of strings", key);
  if (it->size() > max_items) return Errorf("'{}' has more than {} entries", key, max_items);
  for (const auto& e : *it) {
    if (!e.is_string()) return Errorf("'{}' must be a string or a list of strings", key);
    out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace shoal::server
