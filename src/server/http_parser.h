// RequestParser: Beast's HTTP/1.1 request parser storing straight into an HttpRequest, with our
// limits (header and trailer bytes) and RFC 9112 transfer-coding rules; never throws.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange without it
// clang-format on
#include <boost/beast/http/basic_parser.hpp>
#include <cstdint>
#include <string>

#include "server/http.h"

namespace shoal::server {

class RequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  // Headers (request line included) and, separately, trailer fields are each limited to
  // `header_limit` bytes; the body to `max_body` bytes (Beast reports body_limit).
  RequestParser(uint64_t max_body, size_t header_limit);

  HttpRequest& request() { return req_; }
  // Non-zero when the request was refused for a reason of ours (501 unsupported transfer
  // coding, 400 Content-Length with Transfer-Encoding, 431 trailer too large): the status to
  // answer with, and why. Parsing stops with an error code then.
  int reject_status() const { return reject_status_; }
  const std::string& reject_reason() const { return reject_reason_; }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;

  void Reject(int status, std::string reason, error_code& ec);

  void on_request_impl(boost::beast::http::verb, string_view method, string_view target,
                       int version, error_code& ec) override;
  void on_response_impl(int, string_view, int, error_code& ec) override;
  void on_field_impl(boost::beast::http::field, string_view name, string_view value,
                     error_code& ec) override;
  void on_header_impl(error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code& ec) override;
  size_t on_body_impl(string_view body, error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t size, string_view extensions, error_code& ec) override;
  size_t on_chunk_body_impl(std::uint64_t remain, string_view body, error_code& ec) override;
  void on_finish_impl(error_code& ec) override;

  HttpRequest req_;
  uint64_t max_body_;
  size_t header_limit_;
  bool in_trailer_ = false;
  size_t trailer_bytes_ = 0;
  bool has_content_length_ = false;
  bool has_transfer_encoding_ = false;
  std::string transfer_encoding_;  // every Transfer-Encoding field, joined with ","
  int reject_status_ = 0;
  std::string reject_reason_;
};

}  // namespace shoal::server
