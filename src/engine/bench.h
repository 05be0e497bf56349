// Throughput benchmark in llama-bench's terms: pp<N> (one prompt batch) and tg<N> (N single-token
// decode steps from an empty cache), repeated, with random token ids.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "model/model.h"
#include "threading/thread_pool.h"

namespace shoal {

struct BenchOptions {
  int32_t n_prompt = 512;  // 0 skips the pp test
  int32_t n_gen = 128;     // 0 skips the tg test
  int reps = 3;
  bool warmup = true;  // one untimed run of each test first, as llama-bench does
  DType kv_type = DType::kF16;
  uint64_t seed = 1;
};

struct BenchTest {
  int32_t n_prompt = 0;            // set for pp tests
  int32_t n_gen = 0;               // set for tg tests
  std::vector<double> samples_ts;  // tokens per second of each repetition
  double avg_ts = 0;
  double stddev_ts = 0;  // sample standard deviation (n - 1), as llama-bench
};

Result<std::vector<BenchTest>> RunBench(Model& model, ThreadPool& pool, const BenchOptions& o);

// Bytes of weights one decode step reads: every tensor of the model's layers plus the output
// head and norms; the embedding table contributes one row.
uint64_t DecodeBytesPerToken(const gguf::File& file, const HParams& hp);

}  // namespace shoal
