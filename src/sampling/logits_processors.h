// Logits processors: penalties, top-k, top-p, min-p and temperature over a candidate token set.
//
// Each processor works on a CandidateSet in place and never empties it (at least one token is
// always kept, like llama.cpp's min_keep = 1). The Sampler chains them in llama.cpp's default
// order: penalties -> top-k -> top-p -> min-p -> temperature -> draw.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampling_params.h"

namespace shoal {

struct TokenCandidate {
  int32_t id;
  float logit;
  float p;  // probability, valid only after Softmax()
};

// The total order used everywhere: higher logit first, lower id first among equal logits.
inline bool CandidateBefore(const TokenCandidate& a, const TokenCandidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

struct CandidateSet {
  std::vector<TokenCandidate> items;
  bool sorted = false;  // items are in CandidateBefore order
};

// How often a token occurs in the penalty window.
struct TokenCount {
  int32_t id;
  int32_t count;
};

// Counts the ids of the last `last_n` tokens of `history` (< 0: all of it) into `out`, sorted by
// id. Ids outside [0, n_vocab) are ignored. Reuses out's capacity.
void CountPenaltyWindow(std::span<const int32_t> history, int last_n, int32_t n_vocab,
                        std::vector<TokenCount>* out);

// llama.cpp's penalty for one logit seen `count` (> 0) times: repetition (divide a positive logit,
// multiply a non-positive one), then frequency and presence.
float PenalizeLogit(float logit, int32_t count, const SamplingParams& params);

// Fills `set` with every token of `logits` [n_vocab] (ids 0..n_vocab-1 in order, NaN read as
// -inf), with the penalties applied to the tokens in `counts`. Not sorted.
void FillAll(const float* logits, int32_t n_vocab, std::span<const TokenCount> counts,
             const SamplingParams& params, CandidateSet* set);

// Fills `set` with the k best tokens (1 <= k) of the penalized logits, sorted, without touching a
// buffer of n_vocab entries: one pass keeps the raw top (k + counts.size()), which must contain
// every unpenalized member of the answer, then the penalized tokens join and the best k stay.
void FillTopK(const float* logits, int32_t n_vocab, std::span<const TokenCount> counts,
              const SamplingParams& params, int k, CandidateSet* set);

// Keeps the k best (k <= 0 or k >= size: no-op). Leaves the set sorted when it cut.
void KeepTopK(CandidateSet* set, int k);
// Keeps the shortest most-likely prefix whose probability mass reaches p (p >= 1: no-op;
// p <= 0: the single best token). An unsorted set stays unsorted (its order is a deterministic
// function of its contents); the cost is one pass plus sorting the tokens near the cut.
void KeepTopP(CandidateSet* set, float p);
// Keeps tokens whose probability is at least p times the best one's (p <= 0: no-op).
void KeepMinP(CandidateSet* set, float p);
// Divides every logit by t (t > 0).
void ApplyTemperature(CandidateSet* set, float t);
// Sets p to the softmax of the logits (item order unchanged, sum in item order).
void Softmax(CandidateSet* set);
// Sorts into CandidateBefore order if not sorted yet.
void SortCandidates(CandidateSet* set);

}  // namespace shoal
