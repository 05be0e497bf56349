// Continuous-batching scheduler: pure logic that decides, each step, which sequences advance
// by how many tokens and which KV blocks they own. It touches no tensor (DESIGN.md principle 3)
// and reads time only through an injected Clock.
//
// Each step: running decodes first (oldest first), then running prefills, then swapped-out
// sequences coming back, then waiting sequences in FCFS order, within max_num_batched_tokens
// rows. When blocks run out, the newest running sequence is preempted: by swap when swap slots
// are configured and free (its blocks are copied out and back later), otherwise by recompute
// (its blocks are freed; it goes to the front of the waiting queue and recomputes prompt +
// generated tokens, reusing whatever of its prefix survives in the prefix cache).
//
// Models with a recurrent state per sequence (SchedConfig::state_slots > 0, e.g. kimi-k3's KDA)
// get one state slot per running sequence beside its block table: allotted at admission (with
// one more per fork the request will make), freed with the blocks at finish and at preemption
// (by recompute, which rebuilds the state from position 0). The state is not swapped (swap is
// off for them). Prefix caching works through state snapshots (SchedConfig::state_snapshots):
// when a step ends a sequence exactly on a full block that is in the prefix cache, the next plan
// copies its state into a snapshot slot keyed by that block's hash (StateSnapshots, LRU); a hit
// accepts only the longest cached prefix whose last block has a snapshot, and the plan copies
// the snapshot into the new sequence's slot before its remaining prompt runs.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "kvcache/block_allocator.h"
#include "sched/state_snapshots.h"

namespace shoal {

struct SchedConfig {
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;              // running sequences (forks may exceed it)
  int32_t max_num_batched_tokens = 2048;  // rows in one step (decodes + prefill chunks)
  int32_t max_model_len = 4096;           // prompt + generated tokens per sequence
  bool enable_prefix_caching = false;
  int32_t swap_blocks = 0;  // swap slots; 0 = preemption by recompute only
  // Prompts of at least this many tokens compute their prompt positions with other attention
  // numerics (model/batch.h kTiledPromptMin; the engine passes it). 0 disables the rule.
  int32_t tiled_prompt_min = 64;
  // > 0: the model keeps a recurrent state per sequence in this many slots (KvLayout::
  // n_state_slots counts these and the snapshots); forces swap_blocks to 0.
  int32_t state_slots = 0;
  // Snapshot slots [state_slots, state_slots + state_snapshots) for the prefix cache of a model
  // with state slots; 0 forces enable_prefix_caching off for it.
  int32_t state_snapshots = 0;
};

// Prefix-cache snapshot slots beside `seq_slots` sequence slots: as many again, so each running
// sequence's newest block-boundary state can stay while as many shared prefixes are held (a
// 2048-token chunked prompt takes one per chunk). Costs the state once more per slot (17 KiB
// per sequence for the tiny kimi-k3, 1.5 MiB for `small`). Engine::Create and the pipeline nodes
// share this rule, so the slot ids agree across stages.
inline int32_t StateSnapshotSlots(int32_t seq_slots) { return seq_slots; }

// One sequence's part of a step: compute tokens [start, start + n) of its token list.
struct ScheduledChunk {
  int64_t seq_id = 0;
  int32_t start = 0;
  int32_t n = 0;
  bool samples = false;     // the chunk reaches the newest token: a next token is sampled
  int32_t tiled_until = 0;  // model/batch.h TiledUntil(n_prompt) of the sequence
  int32_t state_slot = -1;  // the sequence's recurrent-state slot (-1: the model keeps none)
};

// A whole-block copy (all layers, K and V).
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
};

// What one step does. The executor runs, in this order: swap_out (pool block -> swap slot),
// copies (pool -> pool, copy-on-write, in list order), swap_in (swap slot -> pool block),
// state_copies (recurrent-state slot -> slot, in list order: forks since the last step, prefix
// snapshots taken and snapshots restored on prefix hits), then the forward pass
// over `chunks`. A step never has both swap-outs and swap-ins.
struct StepPlan {
  std::vector<BlockCopy> swap_out;
  std::vector<BlockCopy> copies;
  std::vector<BlockCopy> swap_in;
  std::vector<BlockCopy> state_copies;
  std::vector<ScheduledChunk> chunks;
  std::vector<int64_t> preempted;  // sequences preempted in this step (swap or recompute)

  int32_t n_tokens() const {
    int32_t s = 0;
    for (const auto& c : chunks) s += c.n;
    return s;
  }
};

enum class SeqState { kWaiting, kRunning, kSwapped };

class Scheduler {
 public:
  // `alloc` is the KV pool's block accounting; `clock` may be null (times read as 0).
  Scheduler(const SchedConfig& cfg, BlockAllocator* alloc, const Clock* clock = nullptr);

  // Queues a sequence with its prompt. Fails if it can never fit. `n_choices` - 1 forks will
  // follow its first sample (with state slots, admission reserves a slot for each). `prompted`
  // >= 0: only that many leading tokens were a prompt (a resumed request), the tiled numerics
  // follow them (engine::Request::prompted).
  Status Add(int64_t seq_id, std::vector<int32_t> tokens, int32_t n_choices = 1,
             int32_t prompted = -1);
  // Records a sampled token: the sequence now has one more token to compute.
  void AppendToken(int64_t seq_id, int32_t token);
  // Makes `child_id` a copy of running sequence `parent_id` sharing all its blocks (refcounts);
  // a later write into a shared partial block copies it first (StepPlan::copies). With state
  // slots the child takes one the parent reserved and the next plan copies the state into it.
  Status Fork(int64_t parent_id, int64_t child_id);
  // Removes a sequence and frees its blocks and swap slots at once (publishing its computed
  // full blocks to the prefix cache first).
  void Finish(int64_t seq_id);
  // Holds a sequence out of the next plans (held = true) or lets it run again: a held sequence
  // keeps its tokens, blocks and state but plans no chunk (the server holds the sequences of a
  // client that stopped reading its stream). Other sequences' plans are unaffected.
  void Hold(int64_t seq_id, bool held);
  bool Held(int64_t seq_id) const { return seqs_.at(seq_id).held; }
  // Sequences that are not held: the next plan may have work only if this is > 0.
  int32_t n_unheld() const { return static_cast<int32_t>(seqs_.size()) - n_held_; }

  // The executor lost every KV row (and swap slot): a node died and the plan was redone. Every
  // sequence goes back to the waiting queue with nothing computed, oldest first, keeping its
  // tokens, so its KV is rebuilt by prefill over prompt + generated tokens; the prefix cache is
  // emptied. Call it instead of running the last plan's remaining steps.
  void DropAllKv();
  int64_t kv_drops_total() const { return kv_drops_; }

  // Plans the next step and marks planned tokens as computed. Blocks computed by earlier steps
  // are published to the prefix cache here, so call it only after the previous plan ran.
  StepPlan Schedule();

  const BlockTable& Table(int64_t seq_id) const { return seqs_.at(seq_id).table; }
  const std::vector<int32_t>& Tokens(int64_t seq_id) const { return seqs_.at(seq_id).tokens; }
  bool Has(int64_t seq_id) const { return seqs_.count(seq_id) != 0; }
  SeqState State(int64_t seq_id) const { return seqs_.at(seq_id).state; }
  // The sequence's recurrent-state slot (-1 while it holds none).
  int32_t StateSlot(int64_t seq_id) const { return seqs_.at(seq_id).state_slot; }
  int32_t n_free_state_slots() const { return static_cast<int32_t>(free_states_.size()); }
  bool idle() const { return seqs_.empty(); }
  int32_t n_seqs() const { return static_cast<int32_t>(seqs_.size()); }
  int32_t n_tokens(int64_t seq_id) const;
  int32_t n_computed(int64_t seq_id) const { return seqs_.at(seq_id).n_computed; }
  // Prompt tokens served by the prefix cache at the sequence's first admission (0 before).
  int32_t CachedTokens(int64_t seq_id) const;
  // Microseconds from Add to the first scheduled chunk (to now while still waiting).
  int64_t QueueMicros(int64_t seq_id) const;

  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t n_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t n_swapped() const { return static_cast<int32_t>(swapped_.size()); }
  int64_t preemptions_total() const { return preemptions_; }
  // Tokens whose KV rows DropAllKv threw away (to be recomputed).
  int64_t kv_dropped_tokens_total() const { return kv_dropped_tokens_; }
  // Prefix cache lookups and hits in tokens, counted at every admission from the waiting queue.
  int64_t prefix_queries_total() const { return prefix_queries_; }
  int64_t prefix_hits_total() const { return prefix_hits_; }
  // Recurrent-state snapshots held for the prefix cache.
  int32_t n_state_snapshots() const { return snapshots_.n_held(); }
  // Fraction of the KV pool's blocks referenced by sequences.
  double KvUsage() const;
  // (slots allocated - slots holding a token) / slots allocated over referenced blocks.
  double KvWaste() const;
  const BlockAllocator& swap_slots() const { return swap_; }
  const SchedConfig& config() const { return cfg_; }

 private:
  struct Seq {
    int64_t id = 0;
    int64_t order = 0;  // arrival order (a fork shares its parent's); newest = largest
    std::vector<int32_t> tokens;
    int32_t n_prompt = 0;
    int32_t n_forks = 0;  // forks still to come (state slots reserved for them at admission)
    int32_t tiled_until = 0;
    int32_t n_computed = 0;  // tokens whose KV rows exist (or are planned)
    BlockTable table;
    std::vector<int32_t> swap_slots;
    int32_t state_slot = -1;
    std::vector<int32_t> reserved_states;  // for the forks to come
    std::vector<uint64_t> hashes;          // chain hashes of the leading full blocks
    int32_t n_published = 0;               // leading blocks already offered to the prefix cache
    int32_t cached_tokens = 0;
    bool admitted_once = false;
    bool held = false;  // Hold(): no chunk is planned for it
    SeqState state = SeqState::kWaiting;
    int64_t step_planned = -1;
    int64_t arrival_us = 0, first_scheduled_us = -1;
  };
  static bool Newer(const Seq& a, const Seq& b) {
    return a.order != b.order ? a.order > b.order : a.id > b.id;
  }
  int64_t Now() const { return clock_ ? clock_->NowMicros() : 0; }
  int32_t HashableBlocks(const Seq& s) const;
  void HashUpTo(Seq& s, int32_t n_blocks);
  // Publishes the computed full blocks; with state snapshots, appends to `state_out` the copy
  // that snapshots the state when the sequence stands exactly at the end of a cached block.
  void Publish(Seq& s, std::vector<BlockCopy>* state_out);
  int32_t CowIndex(const Seq& s) const;
  bool EnsureBlocks(Seq& s, int32_t n, StepPlan* plan);
  int32_t Fit(const Seq& s) const;
  int32_t MakeRoom(Seq& s, int32_t n, bool decode, StepPlan* plan);
  Seq* NewestVictim(const Seq& s);
  void Preempt(Seq& v, StepPlan* plan);
  void PlanChunk(Seq& s, int32_t n, StepPlan* plan, int32_t* budget);
  void InsertRunning(int64_t id);
  void Erase(std::vector<int64_t>& v, int64_t id);
  bool TrySwapIn(Seq& s, int32_t* budget, StepPlan* plan);
  bool TryAdmit(Seq& s, int32_t* budget, StepPlan* plan);
  int32_t TakeState();
  void ReleaseStates(Seq& s);

  SchedConfig cfg_;
  BlockAllocator* alloc_;
  const Clock* clock_;
  BlockAllocator swap_;  // swap slots (never cached)
  std::map<int64_t, Seq> seqs_;
  std::vector<int64_t> running_;           // oldest first
  std::deque<int64_t> waiting_;            // next to admit first
  std::vector<int64_t> swapped_;           // oldest first
  std::vector<int32_t> free_states_;       // free state slots, highest first (take the lowest)
  std::vector<BlockCopy> pending_states_;  // state copies of forks, for the next plan
  StateSnapshots snapshots_;
  int64_t next_order_ = 0;
  int64_t step_ = 0;
  int64_t preemptions_ = 0, prefix_queries_ = 0, prefix_hits_ = 0;
  int64_t kv_drops_ = 0, kv_dropped_tokens_ = 0;
  int32_t n_held_ = 0;  // sequences with held set
};

}  // namespace shoal
