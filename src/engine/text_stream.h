// TextStream: the text of one generated sequence as its tokens arrive (streaming detokenizer,
// stop strings held back until decided, the finish reason). The one implementation behind
// `shoal run`, `shoal serve` and the cluster path, so they cannot drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "sampling/stop_checker.h"
#include "tokenizer/tokenizer.h"

namespace shoal {

// OpenAI's finish_reason for an engine finish: "stop", "length", "abort"; "" for kNone.
std::string OpenAiFinishName(FinishReason r);

struct TextUpdate {
  std::string text;    // text to show now (may be empty: inside a character, or held back)
  std::string finish;  // "" while the sequence goes on; else OpenAI's finish_reason
};

class TextStream {
 public:
  // `replace_invalid`: invalid UTF-8 becomes U+FFFD (for JSON answers); otherwise the bytes
  // pass as they are (a terminal).
  TextStream(const Tokenizer& tokenizer, const SamplingParams& params, std::vector<int32_t> eog,
             bool replace_invalid);

  // One sampled token and the engine's finish for it (kNone while the sequence goes on). A stop
  // string or end-of-generation token ends the text before the engine knows (finish set,
  // stopped() true); after that, further tokens add nothing.
  TextUpdate Push(int32_t token, FinishReason finish);
  bool stopped() const { return stop_.stopped(); }

 private:
  StreamingDetokenizer detok_;
  StopChecker stop_;
};

}  // namespace shoal
