// Log-softmax and top-k for logprobs.
#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>

namespace shoal {

void ComputeLogprobs(const float* logits, int64_t n_vocab, int32_t token, int32_t k, float* logprob,
                     std::vector<std::pair<int32_t, float>>* top, std::vector<int32_t>* scratch) {
  float max = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double lse = static_cast<double>(max) + std::log(sum);
  auto lp = [&](int64_t i) { return static_cast<float>(static_cast<double>(logits[i]) - lse); };
  *logprob = lp(token);
  top->clear();
  k = static_cast<int32_t>(std::min<int64_t>(std::max(k, 0), n_vocab));
  if (k == 0) return;
  scratch->resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i)
    (*scratch)[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::partial_sort(
      scratch->begin(), scratch->begin() + k, scratch->end(),
      [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  for (int32_t i = 0; i < k; ++i) {
    const int32_t t = (*scratch)[static_cast<size_t>(i)];
    top->emplace_back(t, lp(t));
  }
}

}  // namespace shoal
