// ApiError constructors and JSON rendering.
#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace shoal::server {

std::string ApiError::ToJson() const {
  nlohmann::json e = {{"message", message},
                      {"type", type},
                      {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
                      {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}};
  return nlohmann::json{{"error", e}}.dump(-1, ' ', false,
                                           nlohmann::json::error_handler_t::replace);
}

ApiError ApiError::BadRequest(std::string message, std::string param, std::string code) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param),
                  std::move(code)};
}

ApiError ApiError::Unauthorized() {
  return ApiError{401, "Incorrect API key provided. Send it as 'Authorization: Bearer <key>'.",
                  "authentication_error", "", "invalid_api_key"};
}

ApiError ApiError::ModelNotFound(const std::string& model) {
  return ApiError{404, "The model '" + model + "' does not exist.", "invalid_request_error",
                  "model", "model_not_found"};
}

ApiError ApiError::TooManyRequests(int queued) {
  return ApiError{429,
                  "The server is busy: " + std::to_string(queued) +
                      " requests are already waiting. Retry later.",
                  "rate_limit_exceeded", "", "rate_limit_exceeded"};
}

ApiError ApiError::Busy(const std::string& what) {
  return ApiError{429, "The server is busy: " + what + ". Retry later.", "rate_limit_exceeded", "",
                  "rate_limit_exceeded"};
}

ApiError ApiError::Forbidden(std::string why) {
  return ApiError{403, std::move(why), "permission_error", "", "forbidden"};
}

ApiError ApiError::Internal(std::string why) {
  return ApiError{500, std::move(why), "internal_error", "", "internal_error"};
}

ApiError ApiError::Unavailable(std::string why) {
  return ApiError{503, std::move(why), "service_unavailable", "", "service_unavailable"};
}

ApiError ApiError::NotFound(const std::string& path) {
  return ApiError{404, "Unknown path " + path, "invalid_request_error", "", "not_found"};
}

ApiError ApiError::MethodNotAllowed(const std::string& method, const std::string& path) {
  return ApiError{405, "Method " + method + " is not allowed on " + path, "invalid_request_error",
                  "", "method_not_allowed"};
}

}  // namespace shoal::server
