// StopChecker: end-of-generation rules (EOS, stop strings, max_tokens) over streamed text.
#include "sampling/stop_checker.h"

#include <algorithm>
#include <utility>

namespace shoal {

std::string_view StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "";
    case StopReason::kEos:
    case StopReason::kStopString:
      return "stop";
    case StopReason::kMaxTokens:
      return "length";
  }
  return "";
}

StopMatch FindStopString(std::string_view text, std::span<const std::string> stops) {
  StopMatch best;
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    const size_t pos = text.find(stops[i]);
    if (pos < best.pos) {  // npos is the largest size_t, so "none" never wins
      best.pos = pos;
      best.index = static_cast<int>(i);
    }
  }
  return best;
}

size_t PartialStopLength(std::string_view text, std::span<const std::string> stops) {
  size_t best = 0;
  for (const std::string& stop : stops) {
    if (stop.size() < 2) continue;  // a 1-byte stop string has no proper non-empty prefix
    for (size_t len = std::min(text.size(), stop.size() - 1); len > best; --len) {
      if (text.substr(text.size() - len) == std::string_view(stop).substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

StopChecker::StopChecker(const SamplingParams& params, std::vector<int32_t> eog_tokens)
    : stops_(params.stop),  // empty entries stay (keeping stop_index aligned) and never match
      eog_tokens_(std::move(eog_tokens)),
      max_tokens_(params.max_tokens),
      ignore_eos_(params.ignore_eos) {
  if (max_tokens_ == 0) reason_ = StopReason::kMaxTokens;  // nothing may be generated
}

bool StopChecker::IsEog(int32_t token) const {
  return std::find(eog_tokens_.begin(), eog_tokens_.end(), token) != eog_tokens_.end();
}

StopUpdate StopChecker::Stop(StopReason reason) {
  reason_ = reason;
  StopUpdate u;
  u.emit = std::move(pending_);
  pending_.clear();
  u.reason = reason;
  return u;
}

StopUpdate StopChecker::Add(int32_t token, std::string_view text) {
  if (stopped()) return StopUpdate{"", reason_, -1};
  ++n_tokens_;
  if (!ignore_eos_ && IsEog(token)) return Stop(StopReason::kEos);
  StopUpdate u = AddText(text);
  if (u.reason == StopReason::kNone && max_tokens_ > 0 && n_tokens_ >= max_tokens_) {
    StopUpdate last = Stop(StopReason::kMaxTokens);
    u.emit += last.emit;
    u.reason = last.reason;
  }
  return u;
}

StopUpdate StopChecker::AddText(std::string_view text) {
  if (stopped()) return StopUpdate{"", reason_, -1};
  pending_.append(text);
  StopUpdate u;
  const StopMatch m = FindStopString(pending_, stops_);
  if (m.pos != std::string_view::npos) {
    pending_.resize(m.pos);  // the stop string and what follows are withheld for good
    u = Stop(StopReason::kStopString);
    u.stop_index = m.index;
    return u;
  }
  const size_t hold = PartialStopLength(pending_, stops_);
  u.emit.assign(pending_, 0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return u;
}

std::string StopChecker::Flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace shoal
