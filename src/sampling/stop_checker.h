// StopChecker: end-of-generation rules (EOS, stop strings, max_tokens) over streamed text.
//
// The engine feeds each generated token with its detokenized text increment. The checker says
// what text is safe to send now: a suffix that could be the start of a stop string is held back
// until the next increments decide it, and a stop string (with everything after it) is never
// emitted. So "He" + "llo" with stop "Hello" emits nothing and stops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/sampling_params.h"

namespace shoal {

enum class StopReason {
  kNone,        // still generating
  kEos,         // an end-of-generation token (unless ignore_eos)
  kStopString,  // one of params.stop appeared
  kMaxTokens,   // params.max_tokens tokens generated
};

// OpenAI's finish_reason for a stop reason: "stop", "length", or "" while generating. (Not named
// FinishReason: engine/engine.h has an enum of that name.)
std::string_view StopReasonName(StopReason reason);

struct StopUpdate {
  std::string emit;                       // text to send to the client now
  StopReason reason = StopReason::kNone;  // != kNone: generation is over
  int stop_index = -1;                    // for kStopString: which entry of params.stop
};

// The earliest complete occurrence of any (non-empty) stop string in `text`.
struct StopMatch {
  size_t pos = std::string_view::npos;  // byte offset, npos when none
  int index = -1;                       // index into `stops`
};
StopMatch FindStopString(std::string_view text, std::span<const std::string> stops);

// Length of the longest suffix of `text` that is a proper prefix of some stop string (the text
// that must be held back because the next increment could complete a stop string).
size_t PartialStopLength(std::string_view text, std::span<const std::string> stops);

class StopChecker {
 public:
  // eog_tokens: the vocabulary's end-of-generation ids (EOS, EOT, <|im_end|>, ...).
  StopChecker(const SamplingParams& params, std::vector<int32_t> eog_tokens);

  // One generated token and its text increment (may be empty, e.g. inside a UTF-8 character).
  // An end-of-generation token's own text is not emitted (unless ignore_eos). After a stop,
  // further calls return the same reason and no text.
  StopUpdate Add(int32_t token, std::string_view text);

  // Text only: stop strings and holdback, no token counting or EOS.
  StopUpdate AddText(std::string_view text);

  // Returns and clears the held-back text, for when generation ends for an outside reason
  // (context full, cancelled).
  std::string Flush();

  bool stopped() const { return reason_ != StopReason::kNone; }
  StopReason reason() const { return reason_; }
  int n_tokens() const { return n_tokens_; }
  // Text received but not yet emitted.
  const std::string& held() const { return pending_; }

 private:
  StopUpdate Stop(StopReason reason);
  bool IsEog(int32_t token) const;

  std::vector<std::string> stops_;
  std::vector<int32_t> eog_tokens_;
  int max_tokens_;
  bool ignore_eos_;
  int n_tokens_ = 0;
  StopReason reason_ = StopReason::kNone;
  std::string pending_;
};

}  // namespace shoal
