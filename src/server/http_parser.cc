// RequestParser: request line, fields, body and trailer into an HttpRequest, with our limits.
#include "server/http_parser.h"

#include <algorithm>
#include <cctype>

namespace shoal::server {

namespace http = boost::beast::http;

namespace {

std::string Lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// True when a Transfer-Encoding list is exactly "chunked" (RFC 9112 6.1: a server that receives
// any other coding it does not understand answers 501). Empty list elements are allowed.
bool OnlyChunked(std::string_view list) {
  int n_codings = 0;
  bool chunked = false;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(pos, end - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) {
      ++n_codings;
      chunked = Lower(item) == "chunked";
    }
    pos = end + 1;
  }
  return n_codings == 1 && chunked;
}

}  // namespace

RequestParser::RequestParser(uint64_t max_body, size_t header_limit)
    : max_body_(max_body), header_limit_(header_limit) {
  body_limit(max_body);
  basic_parser::header_limit(static_cast<std::uint32_t>(header_limit));
}

void RequestParser::Reject(int status, std::string reason, error_code& ec) {
  reject_status_ = status;
  reject_reason_ = std::move(reason);
  // Any parse error stops Beast; the session answers reject_status() instead of a plain 400.
  ec = status == 431 ? http::error::header_limit : http::error::bad_transfer_encoding;
}

void RequestParser::on_request_impl(http::verb, string_view method, string_view target, int version,
                                    error_code& ec) {
  if (version != 10 && version != 11) {
    Reject(505, "HTTP version not supported", ec);
    return;
  }
  req_.method.assign(method.data(), method.size());
  std::string_view t(target.data(), target.size());
  const size_t q = t.find('?');
  if (q != std::string_view::npos) {
    req_.query.assign(t.substr(q + 1));
    t = t.substr(0, q);
  }
  req_.target.assign(t);
}

void RequestParser::on_response_impl(int, string_view, int, error_code& ec) {
  ec = http::error::bad_method;  // never called for a request parser
}

void RequestParser::on_field_impl(http::field, string_view name, string_view value,
                                  error_code& ec) {
  if (in_trailer_) {
    // Trailer fields are read and dropped; the same limit as the header bounds them.
    trailer_bytes_ += name.size() + value.size() + 4;
    if (trailer_bytes_ > header_limit_) Reject(431, "request trailer fields too large", ec);
    return;
  }
  std::string key = Lower(std::string_view(name.data(), name.size()));
  if (key == "content-length") has_content_length_ = true;
  if (key == "transfer-encoding") {
    has_transfer_encoding_ = true;
    if (!transfer_encoding_.empty()) transfer_encoding_ += ',';
    transfer_encoding_.append(value.data(), value.size());
  }
  req_.headers.emplace_back(std::move(key), std::string(value.data(), value.size()));
}

void RequestParser::on_header_impl(error_code& ec) {
  in_trailer_ = true;
  if (has_transfer_encoding_ && has_content_length_) {
    // RFC 9112 6.3: both present is a smuggling attempt or a broken client; refuse it.
    Reject(400, "both Content-Length and Transfer-Encoding in one request", ec);
  } else if (has_transfer_encoding_ && !OnlyChunked(transfer_encoding_)) {
    Reject(501, "unsupported Transfer-Encoding (only chunked is implemented)", ec);
  }
}

void RequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) {
  if (length) req_.body.reserve(static_cast<size_t>(std::min(*length, max_body_)));
}

size_t RequestParser::on_body_impl(string_view body, error_code&) {
  req_.body.append(body.data(), body.size());
  return body.size();
}

void RequestParser::on_chunk_header_impl(std::uint64_t, string_view, error_code&) {}

size_t RequestParser::on_chunk_body_impl(std::uint64_t, string_view body, error_code&) {
  req_.body.append(body.data(), body.size());
  return body.size();
}

void RequestParser::on_finish_impl(error_code&) {}

}  // namespace shoal::server
