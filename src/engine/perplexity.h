// Perplexity exactly as llama.cpp's llama-perplexity computes it, so figures compare.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "kvcache/kv_store.h"
#include "model/model.h"
#include "threading/thread_pool.h"

namespace shoal {

struct PerplexityResult {
  int32_t n_ctx = 0;
  int32_t n_chunks = 0;
  int64_t n_scored = 0;
  std::vector<double> running_ppl;  // exp(mean NLL) after each chunk
  double ppl = 0;
  double stderr_ppl = 0;  // ppl * sqrt(var(NLL) / (n - 1)), llama.cpp's "+/-"
};

// tokens: the whole text tokenized once with BOS. It is cut into floor(n / n_ctx) chunks; in
// each the first token is replaced by `bos` (when bos >= 0), the chunk runs in one batch from an
// empty KV cache, and predictions at positions n_ctx/2 .. n_ctx-2 are scored.
// on_chunk (optional) is called after each chunk with its index and the running perplexity.
Result<PerplexityResult> ComputePerplexity(Model& model, const std::vector<int32_t>& tokens,
                                           int32_t n_ctx, int32_t bos, DType kv_type,
                                           ThreadPool* pool,
                                           void (*on_chunk)(int32_t, double) = nullptr);

// The same through any executor (e.g. a pipeline of nodes): chunks use blocks [0, n_ctx /
// block_size) of the executor's KV pool, overwritten chunk after chunk.
Result<PerplexityResult> ComputePerplexity(Executor& exec, const std::vector<int32_t>& tokens,
                                           int32_t n_ctx, int32_t bos, int32_t block_size,
                                           void (*on_chunk)(int32_t, double) = nullptr);

}  // namespace shoal
