// Server-sent events parser (see sse.h).
#include "loadgen/sse.h"

namespace shoal::loadgen {

Status SseParser::Feed(std::string_view bytes, std::vector<std::string>* events) {
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      line_.append(bytes);
      if (line_.size() > kMaxEventBytes)
        return Errorf("SSE line longer than {} bytes", kMaxEventBytes);
      return Status::Ok();
    }
    line_.append(bytes.substr(0, nl));
    bytes.remove_prefix(nl + 1);
    SHOAL_RETURN_IF_ERROR(EndLine(events));
  }
  return Status::Ok();
}

Status SseParser::EndLine(std::vector<std::string>* events) {
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  if (line_.empty()) {  // blank line: the event is complete
    if (has_data_) events->push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return Status::Ok();
  }
  std::string_view line = line_;
  if (line.front() != ':') {  // ":" starts a comment
    const size_t colon = line.find(':');
    const std::string_view field = line.substr(0, colon);
    std::string_view value =
        colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field == "data") {
      if (has_data_) data_.push_back('\n');
      data_.append(value);
      has_data_ = true;
      if (data_.size() > kMaxEventBytes)
        return Errorf("SSE event longer than {} bytes", kMaxEventBytes);
    }
  }
  line_.clear();
  return Status::Ok();
}

}  // namespace shoal::loadgen
