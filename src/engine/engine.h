// The Engine: requests in, tokens out; one step = one scheduled batch through the executor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "base/status.h"
#include "kvcache/block_allocator.h"
#include "kvcache/kv_store.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"
#include "sched/scheduler.h"
#include "threading/thread_pool.h"

namespace shoal {

struct EngineConfig {
  int n_threads = 0;             // 0 = all hardware threads
  int32_t n_ctx = 4096;          // max tokens per sequence (prompt + generated)
  int32_t kv_blocks = 0;         // 0 = max_num_seqs sequences of n_ctx, at most 1 GiB
  int32_t block_size = 16;       // tokens per KV block
  DType kv_dtype = DType::kF16;  // F16 = llama.cpp's default numerics; F32 = exact
  int32_t max_num_seqs = 16;
  int32_t max_num_batched_tokens = 2048;
  uint64_t kv_mem_bytes = 0;   // > 0: the KV pool holds this many bytes (overrides kv_blocks)
  bool enable_prefix_caching = true;
  int32_t swap_blocks = 0;     // CPU swap space in blocks; 0 = preempt by recompute
  bool return_logits = false;  // copy each sampled step's logits into the event (tests)
};

// Runs a batch of token chunks through the layers; the local executor owns the whole model.
// (The distributed executor of later issues implements the same interface.)
class Executor {
 public:
  virtual ~Executor() = default;
  virtual int64_t n_vocab() const = 0;
  // Computes logits for batch.out_rows; writes [out_rows.size(), n_vocab] into logits.
  virtual Status Run(const Batch& batch, std::vector<float>* logits) = 0;
};

// Runs the whole model in this process over its own KV pool and thread pool.
class LocalExecutor final : public Executor {
 public:
  LocalExecutor(Model* model, KvStore kv, int n_threads)
      : model_(model), kv_(std::move(kv)), pool_(n_threads) {}
  int64_t n_vocab() const override { return model_->hparams().n_vocab; }
  Status Run(const Batch& batch, std::vector<float>* logits) override;

 private:
  Model* model_;
  KvStore kv_;
  ThreadPool pool_;
  ForwardOutput out_;
};
enum class FinishReason { kNone, kEos, kLength, kCancelled };
const char* FinishReasonName(FinishReason r);

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int32_t n = 1;          // parallel choices
  int32_t logprobs = -1;  // -1: none; k >= 0: sampled token's logprob and the top k
};

struct TokenEvent {
  int64_t id = 0;
  int32_t index = 0;  // choice
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top_logprobs;
  FinishReason finish = FinishReason::kNone;  // set on the sequence's last event
  std::vector<float> logits;                  // only with EngineConfig::return_logits
};

struct EngineStats {
  int32_t n_running = 0, n_waiting = 0, n_swapped = 0;
  double kv_usage = 0;
  int64_t prompt_tokens_total = 0, generation_tokens_total = 0, preemptions_total = 0,
          prefix_queries_total = 0, prefix_hits_total = 0;
  double kv_waste = 0;
};

class Engine {
 public:
  // Builds a local engine over a loaded model (the whole model: layers [0, n_layer)).
  static Result<std::unique_ptr<Engine>> Create(Model* model, const EngineConfig& cfg,
                                                std::vector<int32_t> eog_ids);
  // Builds an engine over any executor; kv blocks are accounted here, stored by the executor.
  Engine(std::unique_ptr<Executor> exec, const EngineConfig& cfg, int32_t kv_blocks,
         std::vector<int32_t> eog_ids);

  // Queues a request; returns its id.
  Result<int64_t> Add(Request req);
  // Stops a request now and frees its KV blocks.
  void Cancel(int64_t id);
  // Runs one step; returns the tokens sampled in it (at most one per sequence).
  Result<std::vector<TokenEvent>> Step();
  bool idle() const { return sched_.idle(); }
  int32_t CachedTokens(int64_t id) const { return 0; }
  EngineStats stats() const { return stats_; }

  // The tokens of a live request (prompt + generated).
  const std::vector<int32_t>& Tokens(int64_t id) const { return seqs_.at(id).tokens; }
  const EngineConfig& config() const { return cfg_; }
  int32_t kv_blocks() const { return alloc_.n_blocks(); }

 private:
  struct Live {
    std::vector<int32_t> tokens;
    int32_t n_prompt = 0;
    SamplingParams params;
    int32_t logprobs = -1;
    std::unique_ptr<Sampler> sampler;
  };
  void Release(int64_t id);

  EngineConfig cfg_;
  std::unique_ptr<Executor> exec_;
  BlockAllocator alloc_;
  Scheduler sched_;
  std::vector<int32_t> eog_;
  std::map<int64_t, Live> seqs_;
  int64_t next_id_ = 1;
  Batch batch_;
  std::vector<float> logits_;
  EngineStats stats_;
};

}  // namespace shoal
