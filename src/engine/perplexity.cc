// Chunked perplexity (llama-perplexity's method).
#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>

#include "kvcache/block_allocator.h"

namespace shoal {

namespace {

using RunFn = std::function<Status(const StepInput&, std::vector<float>*)>;

Result<PerplexityResult> Perplexity(const RunFn& run, int64_t V, std::span<const int32_t> blocks,
                                    const std::vector<int32_t>& tokens, int32_t n_ctx, int32_t bos,
                                    void (*on_chunk)(int32_t, double)) {
  PerplexityResult r;
  r.n_ctx = n_ctx;
  r.n_chunks = static_cast<int32_t>(tokens.size() / static_cast<size_t>(n_ctx));
  if (r.n_chunks == 0)
    return Errorf("text has {} tokens, fewer than one context of {}", tokens.size(), n_ctx);
  const int32_t first = n_ctx / 2;
  double nll = 0, nll2 = 0;
  std::vector<float> logits;
  for (int32_t c = 0; c < r.n_chunks; ++c) {
    const size_t start = static_cast<size_t>(c) * static_cast<size_t>(n_ctx);
    std::vector<int32_t> ids(tokens.begin() + static_cast<int64_t>(start),
                             tokens.begin() + static_cast<int64_t>(start) + n_ctx);
    if (bos >= 0) ids[0] = bos;
    StepInput in;
    in.batch.Add(0, ids, 0, blocks, false, false, TiledUntil(n_ctx), /*state_slot=*/0);
    for (int32_t j = first; j < n_ctx - 1; ++j) in.batch.out_rows.push_back(j);
    SHOAL_RETURN_IF_ERROR(run(in, &logits));
    for (int32_t j = first; j < n_ctx - 1; ++j) {
      const float* lg = logits.data() + static_cast<int64_t>(j - first) * V;
      const int32_t target = tokens[start + static_cast<size_t>(j) + 1];
      float mx = lg[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, lg[v]);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(lg[v] - mx));
      const double logp = static_cast<double>(lg[target] - mx) - std::log(sum);
      nll -= logp;
      nll2 += logp * logp;
      ++r.n_scored;
    }
    r.running_ppl.push_back(std::exp(nll / static_cast<double>(r.n_scored)));
    if (on_chunk) on_chunk(c, r.running_ppl.back());
  }
  const double n = static_cast<double>(r.n_scored);
  const double mean = nll / n;
  r.ppl = std::exp(mean);
  const double var = nll2 / n - mean * mean;
  r.stderr_ppl = var > 0 && n > 1 ? r.ppl * std::sqrt(var / (n - 1)) : 0.0;
  return r;
}

}  // namespace

Result<PerplexityResult> ComputePerplexity(Model& model, const std::vector<int32_t>& tokens,
                                           int32_t n_ctx, int32_t bos, DType kv_type,
                                           ThreadPool* pool, void (*on_chunk)(int32_t, double)) {
  if (n_ctx < 4) return Errorf("context {} is too small for perplexity (need >= 4)", n_ctx);
  constexpr int32_t kBlock = 16;
  const int32_t n_blocks = BlockTable::BlocksFor(n_ctx, kBlock);
  SHOAL_ASSIGN_OR_RETURN(KvStore kv,
                         KvStore::Create(model.MakeKvLayout(n_blocks, kBlock, kv_type, 1)));
  BlockAllocator alloc(n_blocks);
  BlockTable table;
  SHOAL_RETURN_IF_ERROR(table.Reserve(alloc, n_ctx, kBlock));
  ForwardOutput out;
  auto run = [&](const StepInput& in, std::vector<float>* logits) -> Status {
    SHOAL_RETURN_IF_ERROR(model.Forward(in.batch, nullptr, kv, pool, &out));
    logits->swap(out.logits);
    return Status::Ok();
  };
  return Perplexity(run, model.hparams().n_vocab, table.blocks, tokens, n_ctx, bos, on_chunk);
}

Result<PerplexityResult> ComputePerplexity(Executor& exec, const std::vector<int32_t>& tokens,
                                           int32_t n_ctx, int32_t bos, int32_t block_size,
                                           void (*on_chunk)(int32_t, double)) {
  if (n_ctx < 4) return Errorf("context {} is too small for perplexity (need >= 4)", n_ctx);
  std::vector<int32_t> blocks(static_cast<size_t>(BlockTable::BlocksFor(n_ctx, block_size)));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  StepOutput out;
  auto run = [&](const StepInput& in, std::vector<float>* logits) -> Status {
    // A chunk fills its whole context from position 0, so one whose KV was lost (a pipeline
    // node failed) is simply run again; kMaxLosses in a row fail the measurement.
    constexpr int kMaxLosses = 3;
    for (int lost = 0;; ++lost) {
      SHOAL_RETURN_IF_ERROR(exec.Run(in, &out));
      if (!out.kv_lost) break;
      if (lost + 1 == kMaxLosses)
        return Errorf("the executor lost its KV {} times in a row: {}", kMaxLosses,
                      out.kv_lost->why);
    }
    logits->swap(out.logits);
    return Status::Ok();
  };
  return Perplexity(run, exec.n_vocab(), blocks, tokens, n_ctx, bos, on_chunk);
}

}  // namespace shoal
