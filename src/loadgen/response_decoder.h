// Raw HTTP/1.1 response bytes -> status, then SSE event data (chunked or plain body).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace shoal::loadgen {

// Feeds the bytes read from a socket, in any fragmentation, through Beast's HTTP response parser
// (which undoes chunked transfer encoding) and, for a 200 response, through an SseParser. Bodies
// of other statuses are kept (the first kMaxErrorBody bytes) to explain the failure.
class ResponseDecoder {
 public:
  ResponseDecoder();
  ~ResponseDecoder();
  ResponseDecoder(const ResponseDecoder&) = delete;
  ResponseDecoder& operator=(const ResponseDecoder&) = delete;

  // Appends the data of each SSE event completed by `bytes` to `events`. An error means the
  // response is malformed; the decoder must not be fed again.
  Status Feed(std::string_view bytes, std::vector<std::string>* events);
  // The peer closed the connection: ok only if the response ended there (a body delimited by
  // the close) and no SSE event was left half-sent.
  Status FeedEof(std::vector<std::string>* events);

  bool header_done() const;
  bool done() const;                      // the whole response message was received
  int status() const;                     // HTTP status code once header_done()
  const std::string& error_body() const;  // start of a non-200 body

  // 512 bytes: enough for an OpenAI-style {"error": {"message": ...}} body.
  static constexpr size_t kMaxErrorBody = 512;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shoal::loadgen
