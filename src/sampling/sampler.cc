// Sampler: picks the next token from a logits row with penalties, top-k/p, min-p, temperature.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace shoal {
namespace {

// SplitMix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

double SampleUniform(uint64_t seed, uint64_t position) {
  // Element `position` of the SplitMix64 stream started at Mix64(seed): distinct seeds give
  // unrelated streams, and any element can be computed without the ones before it.
  constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;
  const uint64_t bits = Mix64(Mix64(seed) + (position + 1) * kGamma);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab) {
  SHOAL_CHECK(n_vocab > 0);
  Reserve();
}

void Sampler::Reset(const SamplingParams& params) {
  params_ = params;
  Reserve();
}

void Sampler::Reserve() {
  const size_t window = params_.repeat_last_n > 0 ? static_cast<size_t>(params_.repeat_last_n)
                                                  : (params_.repeat_last_n < 0 ? 4096 : 0);
  counts_.reserve(window);
  const bool top_k = params_.top_k > 0 && params_.top_k < n_vocab_;
  const size_t k = params_.greedy() ? 1 : (top_k ? static_cast<size_t>(params_.top_k) : 0);
  set_.items.reserve(k > 0 ? k + 2 * window : static_cast<size_t>(n_vocab_));
}

void Sampler::Prepare(const float* logits, std::span<const int32_t> history) {
  if (params_.penalties_enabled()) {
    CountPenaltyWindow(history, params_.repeat_last_n, n_vocab_, &counts_);
  } else {
    counts_.clear();
  }
  if (params_.greedy()) {
    FillTopK(logits, n_vocab_, counts_, params_, 1, &set_);
    set_.items[0].p = 1.0f;
    return;
  }
  if (params_.top_k > 0 && params_.top_k < n_vocab_) {
    FillTopK(logits, n_vocab_, counts_, params_, params_.top_k, &set_);
  } else {
    FillAll(logits, n_vocab_, counts_, params_, &set_);
  }
  KeepTopP(&set_, params_.top_p);
  KeepMinP(&set_, params_.min_p);
  ApplyTemperature(&set_, params_.temperature);
  Softmax(&set_);
}

int32_t Sampler::Sample(const float* logits, std::span<const int32_t> history) {
  if (params_.greedy() && !params_.penalties_enabled()) {
    // Fast path: arg-max of the raw logits, the first (lowest) id on ties; NaN never wins.
    int32_t best = 0;
    float best_logit = std::isnan(logits[0]) ? -std::numeric_limits<float>::infinity() : logits[0];
    for (int32_t i = 1; i < n_vocab_; ++i) {
      if (logits[i] > best_logit) {
        best = i;
        best_logit = logits[i];
      }
    }
    return best;
  }
  Prepare(logits, history);
  const auto& v = set_.items;
  if (v.size() == 1) return v[0].id;
  // Inverse CDF over the candidates in their (deterministic) current order.
  const double u = SampleUniform(params_.seed, history.size());
  double cum = 0.0;
  for (const TokenCandidate& c : v) {
    cum += c.p;
    if (u < cum) return c.id;
  }
  // Rounding left the total a hair below u: take the last candidate with any mass.
  for (auto it = v.rbegin(); it != v.rend(); ++it) {
    if (it->p > 0.0f) return it->id;
  }
  return v.front().id;
}

std::span<const TokenCandidate> Sampler::Candidates(const float* logits,
                                                    std::span<const int32_t> history) {
  Prepare(logits, history);
  std::sort(set_.items.begin(), set_.items.end(),
            [](const TokenCandidate& a, const TokenCandidate& b) {
              return a.p > b.p || (a.p == b.p && a.id < b.id);
            });
  return set_.items;
}

}  // namespace shoal
