// Logits processors: penalties, top-k, top-p, min-p and temperature over a candidate token set.
#include "sampling/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace shoal {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// NaN logits would break the strict weak order of CandidateBefore; they count as impossible.
inline float Sanitize(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// exp(logit - max), robust when max is infinite (tokens at the max weigh 1).
inline double Weight(float logit, float max) {
  return logit == max ? 1.0 : std::exp(static_cast<double>(logit) - static_cast<double>(max));
}

// Top-p buckets: 1/16 nat wide below the max logit; the last one takes everything 32 nats or
// more below (weight < 1.3e-14), so for real logits the crossing bucket holds few tokens.
constexpr int kBuckets = 512;
constexpr float kBucketsPerNat = 16.0f;

// Monotone: a higher logit never lands in a later bucket.
inline int BucketOf(float logit, float max) {
  if (logit == max) return 0;
  const float d = (max - logit) * kBucketsPerNat;
  return d < static_cast<float>(kBuckets - 1) ? static_cast<int>(d) : kBuckets - 1;
}

float MaxLogit(const std::vector<TokenCandidate>& v) {
  float max = kNegInf;
  for (const TokenCandidate& c : v) max = std::max(max, c.logit);
  return max;
}

const TokenCount* FindCount(std::span<const TokenCount> counts, int32_t id) {
  auto it = std::lower_bound(counts.begin(), counts.end(), id,
                             [](const TokenCount& c, int32_t v) { return c.id < v; });
  return (it != counts.end() && it->id == id) ? &*it : nullptr;
}

}  // namespace

void CountPenaltyWindow(std::span<const int32_t> history, int last_n, int32_t n_vocab,
                        std::vector<TokenCount>* out) {
  out->clear();
  if (last_n == 0) return;
  const size_t n = history.size();
  const size_t start =
      (last_n < 0 || static_cast<size_t>(last_n) >= n) ? 0 : n - static_cast<size_t>(last_n);
  for (size_t i = start; i < n; ++i) {
    if (history[i] >= 0 && history[i] < n_vocab) out->push_back({history[i], 1});
  }
  std::sort(out->begin(), out->end(),
            [](const TokenCount& a, const TokenCount& b) { return a.id < b.id; });
  size_t w = 0;  // merge runs of equal ids in place
  for (size_t r = 0; r < out->size(); ++r) {
    if (w > 0 && (*out)[w - 1].id == (*out)[r].id) {
      (*out)[w - 1].count++;
    } else {
      (*out)[w++] = (*out)[r];
    }
  }
  out->resize(w);
}

float PenalizeLogit(float logit, int32_t count, const SamplingParams& params) {
  if (logit <= 0.0f) {
    logit *= params.repeat_penalty;
  } else {
    logit /= params.repeat_penalty;
  }
  return logit - static_cast<float>(count) * params.frequency_penalty -
         (count > 0 ? params.presence_penalty : 0.0f);
}

void FillAll(const float* logits, int32_t n_vocab, std::span<const TokenCount> counts,
             const SamplingParams& params, CandidateSet* set) {
  auto& v = set->items;
  v.resize(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) v[static_cast<size_t>(i)] = {i, Sanitize(logits[i]), 0.0f};
  for (const TokenCount& c : counts) {
    float& l = v[static_cast<size_t>(c.id)].logit;
    l = Sanitize(PenalizeLogit(l, c.count, params));
  }
  set->sorted = false;
}

void FillTopK(const float* logits, int32_t n_vocab, std::span<const TokenCount> counts,
              const SamplingParams& params, int k, CandidateSet* set) {
  SHOAL_CHECK(k >= 1);
  auto& v = set->items;
  v.clear();
  const size_t m = std::min(static_cast<size_t>(n_vocab), static_cast<size_t>(k) + counts.size());
  // A heap whose front is the worst kept candidate (CandidateBefore as the "less than"). Ids
  // rise during the scan, so a newcomer must beat the worst logit strictly to get in.
  int32_t i = 0;
  for (; i < n_vocab && v.size() < m; ++i) {
    v.push_back({i, Sanitize(logits[i]), 0.0f});
    std::push_heap(v.begin(), v.end(), CandidateBefore);
  }
  float worst = v.front().logit;
  for (; i < n_vocab; ++i) {
    const float l = logits[i];  // NaN compares false: never enters
    if (l > worst) {
      std::pop_heap(v.begin(), v.end(), CandidateBefore);
      v.back() = {i, l, 0.0f};
      std::push_heap(v.begin(), v.end(), CandidateBefore);
      worst = v.front().logit;
    }
  }
  if (!counts.empty()) {
    std::erase_if(v, [&](const TokenCandidate& c) { return FindCount(counts, c.id) != nullptr; });
    for (const TokenCount& c : counts) {
      v.push_back({c.id, Sanitize(PenalizeLogit(Sanitize(logits[c.id]), c.count, params)), 0.0f});
    }
  }
  const size_t keep = std::min(v.size(), static_cast<size_t>(k));
  std::partial_sort(v.begin(), v.begin() + static_cast<ptrdiff_t>(keep), v.end(), CandidateBefore);
  v.resize(keep);
  set->sorted = true;
}

void KeepTopK(CandidateSet* set, int k) {
  auto& v = set->items;
  if (k <= 0 || static_cast<size_t>(k) >= v.size()) return;
  if (!set->sorted) {
    std::partial_sort(v.begin(), v.begin() + k, v.end(), CandidateBefore);
  }
  v.resize(static_cast<size_t>(k));
  set->sorted = true;
}

void KeepTopP(CandidateSet* set, float p) {
  auto& v = set->items;
  if (p >= 1.0f || v.size() <= 1) return;
  if (!(p > 0.0f)) {
    KeepTopK(set, 1);
    return;
  }
  const float max = MaxLogit(v);
  if (set->sorted) {
    double sum = 0.0;
    for (const TokenCandidate& c : v) sum += Weight(c.logit, max);
    const double target = static_cast<double>(p) * sum;
    double cum = 0.0;
    for (size_t i = 0; i < v.size(); ++i) {
      cum += Weight(v[i].logit, max);
      if (cum >= target) {
        v.resize(i + 1);
        return;
      }
    }
    return;  // rounding left the mass a hair short: keep everything
  }
  // Unsorted (a whole vocabulary): bucket the mass by distance below the max, find the bucket
  // where the cumulative mass crosses p, keep the buckets above it and sort only that one.
  double mass[kBuckets] = {};
  double sum = 0.0;
  for (const TokenCandidate& c : v) {
    const double w = Weight(c.logit, max);
    mass[BucketOf(c.logit, max)] += w;
    sum += w;
  }
  const double target = static_cast<double>(p) * sum;
  double cum = 0.0;
  int cut = kBuckets - 1;
  for (int b = 0; b < kBuckets; ++b) {
    if (cum + mass[b] >= target) {
      cut = b;
      break;
    }
    cum += mass[b];
  }
  std::erase_if(v, [&](const TokenCandidate& c) { return BucketOf(c.logit, max) > cut; });
  const auto mid = std::partition(
      v.begin(), v.end(), [&](const TokenCandidate& c) { return BucketOf(c.logit, max) < cut; });
  // Inside the crossing bucket, sort only as far as needed: 64 first, then 8x more each round.
  const size_t begin = static_cast<size_t>(mid - v.begin());
  size_t sorted_end = begin;
  size_t m = std::min(v.size(), begin + 64);
  size_t i = begin;
  for (;;) {
    if (sorted_end < m) {
      std::partial_sort(v.begin() + static_cast<ptrdiff_t>(sorted_end),
                        v.begin() + static_cast<ptrdiff_t>(m), v.end(), CandidateBefore);
      sorted_end = m;
    }
    for (; i < m; ++i) {
      cum += Weight(v[i].logit, max);
      if (cum >= target) {
        v.resize(i + 1);
        return;
      }
    }
    if (m == v.size()) return;  // rounding left the mass a hair short: keep everything
    m = std::min(v.size(), begin + (m - begin) * 8);
  }
}

void KeepMinP(CandidateSet* set, float p) {
  auto& v = set->items;
  if (!(p > 0.0f) || v.size() <= 1) return;
  // p_i >= p * p_max  <=>  logit_i >= max_logit + log(p), as llama.cpp computes it.
  const float min_logit = MaxLogit(v) + std::log(p);
  std::erase_if(v, [&](const TokenCandidate& c) { return c.logit < min_logit; });
}

void ApplyTemperature(CandidateSet* set, float t) {
  SHOAL_CHECK(t > 0.0f);
  for (TokenCandidate& c : set->items) c.logit /= t;
}

void Softmax(CandidateSet* set) {
  auto& v = set->items;
  const float max = MaxLogit(v);
  double sum = 0.0;
  for (const TokenCandidate& c : v) sum += Weight(c.logit, max);
  for (TokenCandidate& c : v) c.p = static_cast<float>(Weight(c.logit, max) / sum);
}

void SortCandidates(CandidateSet* set) {
  if (!set->sorted) std::sort(set->items.begin(), set->items.end(), CandidateBefore);
  set->sorted = true;
}

}  // namespace shoal
