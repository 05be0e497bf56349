// HTTP response decoding on Beast's parser (see response_decoder.h).
#include "loadgen/response_decoder.h"

#include <boost/beast/http.hpp>
#include <limits>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include "loadgen/sse.h"

namespace shoal::loadgen {

namespace http = boost::beast::http;

struct ResponseDecoder::Impl {
  http::response_parser<http::buffer_body> parser;
  SseParser sse;
  std::string pending;  // received bytes the HTTP parser has not consumed yet
  std::string error_body;

  Status OnBody(std::string_view body, std::vector<std::string>* events) {
    if (parser.get().result_int() == 200) return sse.Feed(body, events);
    const size_t room = kMaxErrorBody - std::min(kMaxErrorBody, error_body.size());
    error_body.append(body.substr(0, room));
    return Status::Ok();
  }
};

ResponseDecoder::ResponseDecoder() : impl_(std::make_unique<Impl>()) {
  // The stream lasts as long as the server generates; per-request timeouts bound it instead.
  impl_->parser.body_limit(std::numeric_limits<std::uint64_t>::max());
}

ResponseDecoder::~ResponseDecoder() = default;

Status ResponseDecoder::Feed(std::string_view bytes, std::vector<std::string>* events) {
  Impl& m = *impl_;
  m.pending.append(bytes);
  // 16 KiB: a few dozen SSE chunks per parser call; the loop drains larger inputs.
  char scratch[16384];
  while (!m.parser.is_done() && !m.pending.empty()) {
    auto& body = m.parser.get().body();
    body.data = scratch;
    body.size = sizeof(scratch);
    body.more = true;
    boost::beast::error_code ec;
    const size_t used = m.parser.put(boost::asio::buffer(m.pending.data(), m.pending.size()), ec);
    m.pending.erase(0, used);
    const size_t got = sizeof(scratch) - m.parser.get().body().size;
    if (got > 0) SHOAL_RETURN_IF_ERROR(m.OnBody(std::string_view(scratch, got), events));
    if (ec == http::error::need_more) break;
    if (ec == http::error::need_buffer) continue;
    if (ec) return Errorf("malformed HTTP response: {}", ec.message());
    if (used == 0 && got == 0) break;
  }
  return Status::Ok();
}

Status ResponseDecoder::FeedEof(std::vector<std::string>* events) {
  Impl& m = *impl_;
  if (m.parser.is_done()) return Status::Ok();
  if (!m.parser.is_header_done())
    return Errorf("connection closed before the end of the response header");
  boost::beast::error_code ec;
  m.parser.put_eof(ec);
  if (ec) return Errorf("connection closed before the end of the response body ({})", ec.message());
  if (m.parser.get().result_int() == 200 && m.sse.has_partial())
    return Errorf("connection closed in the middle of an SSE event");
  return Status::Ok();
}

bool ResponseDecoder::header_done() const { return impl_->parser.is_header_done(); }
bool ResponseDecoder::done() const { return impl_->parser.is_done(); }
int ResponseDecoder::status() const {
  return header_done() ? static_cast<int>(impl_->parser.get().result_int()) : 0;
}
const std::string& ResponseDecoder::error_body() const { return impl_->error_body; }

}  // namespace shoal::loadgen
