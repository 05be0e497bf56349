// Sampler: picks the next token from a logits row with penalties, top-k/p, min-p, temperature.
//
// The chain is llama.cpp's default order:
//   penalties -> top-k -> top-p -> min-p -> temperature -> draw
// and temperature <= 0 means greedy: the arg-max of the (penalized; with the default penalties
// off, raw) logits, the lowest id winning exact ties, as llama.cpp's greedy sampler does.
//
// Determinism: the draw for the token at position t (t = history.size()) uses a uniform number
// that is a pure function of (params.seed, t) (SplitMix64 counter stream). So the same seed and
// logits give the same tokens whether a sequence ran alone or in a batch, straight through or
// replayed after a failover, with no RNG state to carry between machines.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/logits_processors.h"
#include "sampling/sampling_params.h"

namespace shoal {

// The uniform number in [0, 1) (53 random bits) used for the draw at `position` under `seed`.
double SampleUniform(uint64_t seed, uint64_t position);

class Sampler {
 public:
  // `params` should have passed Validate(). Buffers are sized here; Sample() does not allocate
  // (except when a whole-history penalty window outgrows its buffer, amortized).
  Sampler(const SamplingParams& params, int32_t n_vocab);

  // Picks the next token. logits: [n_vocab]; history: prompt + generated tokens so far.
  int32_t Sample(const float* logits, std::span<const int32_t> history);

  // The set the draw chooses from, after every processor: normalized probabilities, sorted by
  // descending probability (lower id first on ties). For tests and logprobs. Valid until the
  // next call on this sampler. Greedy sampling gives the single arg-max with p = 1.
  std::span<const TokenCandidate> Candidates(const float* logits, std::span<const int32_t> history);

  // For reusing a Sampler on a new request. The sampler keeps no state between calls that
  // affects results (the draw is keyed by position), so Reset() only swaps the parameters.
  void Reset(const SamplingParams& params);
  void Reset() {}

  const SamplingParams& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  // Runs the processors (not the draw) into set_; probabilities filled.
  void Prepare(const float* logits, std::span<const int32_t> history);
  void Reserve();

  SamplingParams params_;
  int32_t n_vocab_;
  CandidateSet set_;
  std::vector<TokenCount> counts_;
};

}  // namespace shoal
