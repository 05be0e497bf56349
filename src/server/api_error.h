// Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with an HTTP status.
#pragma once

#include <string>

namespace shoal::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, "" for none (sent as null)
  std::string code;   // e.g. "context_length_exceeded", "model_not_found"; "" -> null

  std::string ToJson() const;

  static ApiError BadRequest(std::string message, std::string param = "", std::string code = "");
  static ApiError Unauthorized();
  static ApiError ModelNotFound(const std::string& model);
  static ApiError TooManyRequests(int queued);
  // 429 naming what is full, e.g. "4096 sequences are already waiting".
  static ApiError Busy(const std::string& what);
  // 403: the credential is fine but the endpoint is not open to it (or disabled).
  static ApiError Forbidden(std::string why);
  // 500: a bug or an exhausted resource while answering; the message says which.
  static ApiError Internal(std::string why);
  static ApiError Unavailable(std::string why);
  static ApiError NotFound(const std::string& path);
  static ApiError MethodNotAllowed(const std::string& method, const std::string& path);
};

}  // namespace shoal::server
