// Server-sent events: an incremental parser from body bytes to the data of each complete event.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace shoal::loadgen {

// Splits a text/event-stream body into events. Bytes may arrive in any fragmentation (an event,
// a line or a "\r\n" split across reads); an event ends at a blank line and its data is the
// concatenation of its `data:` lines joined by "\n". Comments (":...") and other fields (event,
// id, retry) are ignored; events without data are not reported.
class SseParser {
 public:
  // Appends the data of every event completed by `bytes` to `events`. Fails when one line or
  // one event grows past kMaxEventBytes (a server streaming garbage must not exhaust memory).
  Status Feed(std::string_view bytes, std::vector<std::string>* events);

  // True when bytes of an unfinished event are held (a stream that ends here was cut short).
  bool has_partial() const { return !line_.empty() || has_data_; }

  // 8 MiB: a chat chunk is ~200 bytes; even a whole long completion in one event fits.
  static constexpr size_t kMaxEventBytes = 8u << 20;

 private:
  Status EndLine(std::vector<std::string>* events);

  std::string line_;  // the current line, without its terminator
  std::string data_;  // data of the current event so far
  bool has_data_ = false;
};

}  // namespace shoal::loadgen
