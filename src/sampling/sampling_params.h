// SamplingParams: the per-request knobs of token sampling and stopping (llama.cpp / vLLM style).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace shoal {

// Defaults follow llama.cpp's common_params_sampling (temperature 0.8, top-k 40, top-p 0.95,
// min-p 0.05, penalties off). Every field is plain data; Validate() rejects bad requests.
struct SamplingParams {
  // <= 0: greedy arg-max (lowest id wins exact ties); otherwise logits are divided by it.
  float temperature = 0.8f;
  // Keep the k most likely tokens; <= 0 (or >= n_vocab) disables.
  int top_k = 40;
  // Nucleus: keep the smallest prefix (by probability) whose mass reaches top_p; 1 disables.
  float top_p = 0.95f;
  // Keep tokens with p >= min_p * p_max; 0 disables.
  float min_p = 0.05f;
  // llama.cpp repetition penalty on the last repeat_last_n tokens of prompt + generated text:
  // positive logits are divided by it, negative ones multiplied. 1 disables.
  float repeat_penalty = 1.0f;
  // Window of the penalties (all three): 0 disables them, < 0 means the whole history.
  int repeat_last_n = 64;
  // OpenAI-style: logit -= presence_penalty * [count > 0] + frequency_penalty * count, with
  // counts over the same window (llama.cpp semantics, which include the prompt). 0 disables.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // The random stream: the draw for the token at position t is a pure function of (seed, t).
  uint64_t seed = 0;
  // Generated-token limit; < 0 means no limit (the context length still applies).
  int max_tokens = -1;
  // Generation stops before the first occurrence of any of these strings (empty ones ignored).
  std::vector<std::string> stop;
  // Keep generating after an end-of-generation token.
  bool ignore_eos = false;

  // Checks ranges (finite numbers, probabilities in [0, 1], repeat_penalty > 0).
  Status Validate() const;
  bool greedy() const { return !(temperature > 0.0f); }
  bool penalties_enabled() const {
    return repeat_last_n != 0 &&
           (repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }
};

}  // namespace shoal
