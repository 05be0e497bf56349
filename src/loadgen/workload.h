// Benchmark workloads: the prompts sent (synthetic or from a JSONL file) and when they arrive.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace shoal::loadgen {

struct RequestSpec {
  std::string prompt;
  int64_t prompt_tokens = 0;  // estimate (words); the server's usage gives the true count
  int64_t output_len = 0;     // max_tokens
};

// `n` prompts of `input_len` random common English words each (one word ~ one token for BPE
// vocabularies: each is a single token with its leading space), every prompt different so no
// prefix cache hides the prefill. Deterministic for a seed.
std::vector<RequestSpec> SyntheticRequests(int64_t n, int64_t input_len, int64_t output_len,
                                           uint64_t seed);

// `n` requests from a JSONL file: one JSON object per line, {"prompt": "...", "output_len": N};
// output_len is optional (default_output_len when absent); blank lines are skipped. The lines
// are used in order, cycling when the file has fewer than n.
Result<std::vector<RequestSpec>> LoadDataset(const std::string& path, int64_t n,
                                             int64_t default_output_len);

// Send times in seconds from the start for `n` requests: a Poisson process of `rate` requests/s
// (exponential gaps with mean 1/rate, the first request at 0), or all at 0 when rate is
// infinite. Deterministic for a seed on every platform (no std:: distributions).
std::vector<double> ArrivalOffsets(int64_t n, double rate, uint64_t seed);

}  // namespace shoal::loadgen
