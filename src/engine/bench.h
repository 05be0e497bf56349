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

// Weights of a model in total and those one decoded token reads (a one-token decode step):
// every tensor of the layers, the output head and norms, the embedding table's one row, and of
// each routed-expert tensor ("*_exps.*", [.., .., n_expert]) only n_expert_used of its n_expert
// slices (moe.cc runs only the routed experts); shared experts and dense parts count whole.
struct DecodeFootprint {
  uint64_t total_bytes = 0;  // the whole tensor table
  int64_t total_params = 0;
  uint64_t active_bytes = 0;  // read per decoded token
  int64_t active_params = 0;  // used per decoded token (the embedding row counts as n_embd)
};
DecodeFootprint DecodeFootprintOf(const gguf::File& file, const HParams& hp);
// DecodeFootprintOf(file, hp).active_bytes.
uint64_t DecodeBytesPerToken(const gguf::File& file, const HParams& hp);

}  // namespace shoal
