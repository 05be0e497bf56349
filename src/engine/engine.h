// The Engine: requests in, tokens out; one step = one scheduled batch through the executor.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "engine/executor.h"
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
  int32_t n_ctx = 4096;          // max tokens per sequence (prompt + generated): max_model_len
  int32_t kv_blocks = 0;         // 0 = max_num_seqs sequences of n_ctx, at most 1 GiB
  uint64_t kv_mem_bytes = 0;     // > 0: the KV pool gets kv_mem_bytes / bytes per block blocks
  int32_t block_size = 16;       // tokens per KV block
  DType kv_dtype = DType::kF16;  // F16 = llama.cpp's default numerics; F32 = exact
  int32_t max_num_seqs = 16;
  int32_t max_num_batched_tokens = 2048;
  bool enable_prefix_caching = true;
  int32_t swap_blocks = 0;     // > 0: preemption by swap into this many blocks of swap space
  bool return_logits = false;  // copy each sampled step's logits into the event (tests)
  // Recurrent-state slots (models with a per-sequence state, kimi-k3). Engine::Create sets it
  // to max_num_seqs for such models (0 otherwise); a request's n choices need n of them, and
  // swap is off (sched/scheduler.h).
  int32_t state_slots = 0;
  // Slots after those holding prefix-cache snapshots of the state (StateSnapshotSlots of
  // state_slots, set with it); 0 turns prefix caching off for such a model.
  int32_t state_snapshots = 0;
  // Sequence groups whose steps overlap (vLLM's virtual engines): each group has its own
  // scheduler, max_num_seqs / groups sequences and an equal share of the KV blocks (and swap
  // space), and a step of one group is computed while the others' are in flight. 1 = one step
  // at a time. A pipeline of S stages wants S groups. Tokens do not depend on it.
  int32_t pipeline_groups = 1;
};

enum class FinishReason { kNone, kEos, kLength, kCancelled };
const char* FinishReasonName(FinishReason r);

// The most choices one request may ask for (OpenAI's limit for n).
inline constexpr int32_t kMaxChoices = 128;

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  // Choices: the prompt is prefilled once, then forks; choice i samples with sampling.seed + i.
  int32_t n = 1;
  // -1: none; k in [0, 20]: each event carries the token's logprob and the top-k alternatives.
  int32_t logprobs = -1;
  // A resumed request (the server's "resume"): the length of the prompt as first submitted; the
  // rest of `prompt` was generated, so its rows keep decode numerics (model/batch.h TiledUntil
  // of this length) and the tokens come out as they would have. -1: all of `prompt`.
  int32_t prompted = -1;
};

struct TokenEvent {
  int64_t id = 0;
  int32_t index = 0;  // choice
  int32_t token = -1;
  FinishReason finish = FinishReason::kNone;  // set on the choice's last event
  float logprob = 0;                          // with Request::logprobs >= 0
  std::vector<std::pair<int32_t, float>> top_logprobs;
  std::vector<float> logits;  // only with EngineConfig::return_logits
};

struct EngineStats {
  int32_t n_running = 0, n_waiting = 0, n_swapped = 0;  // sequences (choices)
  double kv_usage = 0;                                  // 0..1 of blocks in use
  int64_t prompt_tokens_total = 0, generation_tokens_total = 0, preemptions_total = 0,
          prefix_queries_total = 0, prefix_hits_total = 0,  // prefix cache, in tokens
      kv_losses_total = 0,        // times the executor lost the KV (failovers)
      replayed_tokens_total = 0;  // tokens whose KV was recomputed after a loss
  double kv_waste = 0;            // (slots allocated - slots used) / slots allocated
};

class Engine {
 public:
  // Builds a local engine over a loaded model (the whole model: layers [0, n_layer)), sized
  // by the rules of ApplyStateRules and the KV memory of cfg.
  static Result<std::unique_ptr<Engine>> Create(Model* model, const EngineConfig& cfg,
                                                std::vector<int32_t> eog_ids);
  // Builds an engine over any executor; kv blocks are accounted here, stored by the executor
  // (which must also hold cfg.swap_blocks blocks of swap space).
  Engine(std::unique_ptr<Executor> exec, const EngineConfig& cfg, int32_t kv_blocks,
         std::vector<int32_t> eog_ids, const Clock* clock = nullptr);

  // Validates and queues a request; returns its id.
  Result<int64_t> Add(Request req);
  // Stops a request now (all choices) and frees its KV blocks.
  void Cancel(int64_t id);
  // Stops one choice of a forked request (e.g. it hit a stop string) and frees its blocks; the
  // other choices go on. Before the fork (or with n = 1) it cancels the whole request.
  void CancelChoice(int64_t id, int32_t index);
  // Holds every sequence of request `id` out of the next steps (held = true) or releases them:
  // a held request keeps its KV and produces no tokens (a client that stopped reading). The
  // other requests' tokens do not change (batch invariance).
  void Hold(int64_t id, bool held);
  // True when a step would do something: a step in flight or a sequence that is not held.
  bool has_work() const;
  // Whether the request still has a live choice.
  bool Has(int64_t id) const { return reqs_.count(id) != 0; }
  // Runs one step; returns the tokens sampled in it (at most one per choice).
  Result<std::vector<TokenEvent>> Step();
  // Nothing queued, running or in flight.
  bool idle() const;

  // Prompt tokens served by the prefix cache (0 for an unknown id or before admission).
  int32_t CachedTokens(int64_t id) const;
  EngineStats stats() const;
  // The tokens (prompt + generated) of a live choice.
  const std::vector<int32_t>& Tokens(int64_t id, int32_t index = 0) const;
  const EngineConfig& config() const { return cfg_; }
  int32_t kv_blocks() const { return kv_blocks_; }

 private:
  struct Live {
    int32_t n_prompt = 0;
    SamplingParams params;
    int32_t logprobs = -1;
    std::vector<int64_t> seqs;  // per choice; -1 before the fork and after it finished
    std::vector<std::unique_ptr<Sampler>> samplers;
    bool sampled = false;  // first token sampled (and forked)
    int32_t cached_tokens = 0;
    int32_t n_live = 0;
  };
  // A sequence group: its own block range [block_base, block_base + n_blocks), swap slots,
  // scheduler, and the step it has in flight.
  struct Group {
    int32_t block_base = 0, swap_base = 0;
    std::unique_ptr<BlockAllocator> alloc;
    std::unique_ptr<Scheduler> sched;
    StepPlan plan;  // the step in flight
    bool in_flight = false;
    StepInput input;                           // what was submitted for it
    std::vector<std::vector<int32_t>> tables;  // global block ids backing input.batch's chunks
  };
  Scheduler& SchedOf(int64_t seq) { return *groups_[static_cast<size_t>(group_of_.at(seq))].sched; }
  const Scheduler& SchedOf(int64_t seq) const {
    return *groups_[static_cast<size_t>(group_of_.at(seq))].sched;
  }
  Status SubmitGroup(int32_t g);
  Status CollectGroup(int32_t g, std::vector<TokenEvent>* events);
  // The executor lost its KV: every step in flight is void and each sequence is recomputed.
  void DropAllKv();
  void SampleChoice(int64_t req_id, Live& r, int32_t index, const float* logits,
                    std::vector<TokenEvent>* events);
  void FinishChoice(int64_t req_id, Live& r, int32_t index);
  void FinishSeq(int64_t seq);

  EngineConfig cfg_;
  std::unique_ptr<Executor> exec_;
  SteadyClock steady_;
  int32_t kv_blocks_ = 0;
  std::vector<Group> groups_;
  std::deque<int32_t> flight_;  // groups in flight, oldest submission first
  int32_t next_group_ = 0;      // where the next submission round starts
  std::vector<int32_t> eog_;
  std::map<int64_t, Live> reqs_;
  std::map<int64_t, std::pair<int64_t, int32_t>> owner_;  // seq -> (request, choice)
  std::map<int64_t, int32_t> group_of_;                   // seq -> group
  int64_t next_id_ = 1, next_seq_ = 1;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  StepInput carry_;  // copies of a plan without chunks, sent with the next step
  StepOutput out_;
  std::vector<int32_t> scratch_;
};

}  // namespace shoal
