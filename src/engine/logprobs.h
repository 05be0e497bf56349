// Log-probabilities of sampled tokens: log-softmax of the raw logits (vLLM's default).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace shoal {

// The most top-k alternatives a request may ask for (OpenAI's top_logprobs limit).
inline constexpr int32_t kMaxLogprobs = 20;

// Computes log p(token) and the k most likely (token, log p) pairs, descending (lower id first
// on ties), from logits [n_vocab]. The normalizer is summed in double in index order, so the
// result is a pure function of the logits. `scratch` is reused between calls.
void ComputeLogprobs(const float* logits, int64_t n_vocab, int32_t token, int32_t k, float* logprob,
                     std::vector<std::pair<int32_t, float>>* top, std::vector<int32_t>* scratch);

}  // namespace shoal
