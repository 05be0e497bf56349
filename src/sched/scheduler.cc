// Scheduler: continuous batching with chunked prefill, prefix caching, preemption and forks.
#include "sched/scheduler.h"

#include <algorithm>
#include <functional>

#include "base/check.h"
#include "kvcache/prefix_hash.h"

namespace shoal {

namespace {
SchedConfig Effective(SchedConfig c) {
  if (c.state_slots > 0) {  // a recurrent state is not swapped; it is cached as snapshots
    c.swap_blocks = 0;
    if (c.state_snapshots <= 0) c.enable_prefix_caching = false;
  } else {
    c.state_snapshots = 0;
  }
  if (!c.enable_prefix_caching) c.state_snapshots = 0;
  return c;
}
}  // namespace

Scheduler::Scheduler(const SchedConfig& cfg, BlockAllocator* alloc, const Clock* clock)
    : cfg_(Effective(cfg)),
      alloc_(alloc),
      clock_(clock),
      swap_(std::max(0, cfg_.swap_blocks)),
      snapshots_(cfg_.state_slots, cfg_.state_snapshots) {
  for (int32_t i = cfg_.state_slots - 1; i >= 0; --i) free_states_.push_back(i);
}

int32_t Scheduler::TakeState() {
  SHOAL_CHECK(!free_states_.empty());
  const int32_t slot = free_states_.back();
  free_states_.pop_back();
  return slot;
}

void Scheduler::ReleaseStates(Seq& s) {
  if (s.state_slot >= 0) free_states_.push_back(s.state_slot);
  for (int32_t r : s.reserved_states) free_states_.push_back(r);
  s.state_slot = -1;
  s.reserved_states.clear();
  std::sort(free_states_.begin(), free_states_.end(), std::greater<>());
}

Status Scheduler::Add(int64_t seq_id, std::vector<int32_t> tokens, int32_t n_choices,
                      int32_t prompted) {
  const int32_t n_prompt = static_cast<int32_t>(tokens.size());
  if (seqs_.count(seq_id)) return Errorf("sequence {} already exists", seq_id);
  if (n_prompt <= 0) return Errorf("sequence {}: empty prompt", seq_id);
  if (n_prompt > cfg_.max_model_len)
    return Errorf("prompt of {} tokens exceeds the maximum model length {}", n_prompt,
                  cfg_.max_model_len);
  if (BlockTable::BlocksFor(n_prompt, cfg_.block_size) > alloc_->n_blocks())
    return Errorf("prompt of {} tokens needs more KV blocks than the cache has ({})", n_prompt,
                  alloc_->n_blocks());
  if (n_choices < 1) return Errorf("sequence {}: {} choices", seq_id, n_choices);
  if (cfg_.state_slots > 0 && n_choices > cfg_.state_slots)
    return Errorf("{} choices need {} recurrent-state slots, the engine has {}", n_choices,
                  n_choices, cfg_.state_slots);
  Seq s;
  s.n_forks = n_choices - 1;
  s.id = seq_id;
  s.order = next_order_++;
  s.tokens = std::move(tokens);
  s.n_prompt = n_prompt;
  const int32_t basis = prompted >= 0 ? std::min(prompted, n_prompt) : n_prompt;
  s.tiled_until = cfg_.tiled_prompt_min > 0 && basis >= cfg_.tiled_prompt_min ? basis : 0;
  s.arrival_us = Now();
  seqs_.emplace(seq_id, std::move(s));
  waiting_.push_back(seq_id);
  return Status::Ok();
}

void Scheduler::AppendToken(int64_t seq_id, int32_t token) {
  auto it = seqs_.find(seq_id);
  SHOAL_CHECK(it != seqs_.end());
  it->second.tokens.push_back(token);
}

Status Scheduler::Fork(int64_t parent_id, int64_t child_id) {
  auto it = seqs_.find(parent_id);
  if (it == seqs_.end()) return Errorf("fork: no sequence {}", parent_id);
  if (seqs_.count(child_id)) return Errorf("fork: sequence {} already exists", child_id);
  if (it->second.state != SeqState::kRunning)
    return Errorf("fork: sequence {} is not running", parent_id);
  Seq c = it->second;  // tokens, progress, hashes, the same blocks
  c.id = child_id;
  c.n_forks = 0;
  c.reserved_states.clear();
  if (cfg_.state_slots > 0) {
    Seq& p = it->second;
    if (p.reserved_states.empty())
      return Errorf("fork: sequence {} has no recurrent-state slot reserved", parent_id);
    c.state_slot = p.reserved_states.back();
    p.reserved_states.pop_back();
    p.n_forks = std::max(0, p.n_forks - 1);
    pending_states_.push_back({p.state_slot, c.state_slot});
  }
  for (int32_t b : c.table.blocks) alloc_->AddRef(b);
  if (c.held) ++n_held_;  // a held parent's forks are held too
  seqs_.emplace(child_id, std::move(c));
  InsertRunning(child_id);
  return Status::Ok();
}

void Scheduler::Hold(int64_t seq_id, bool held) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end() || it->second.held == held) return;
  it->second.held = held;
  n_held_ += held ? 1 : -1;
}

void Scheduler::Finish(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  Seq& s = it->second;
  switch (s.state) {
    case SeqState::kRunning:
      Erase(running_, seq_id);
      break;
    case SeqState::kSwapped:
      Erase(swapped_, seq_id);
      break;
    case SeqState::kWaiting:
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq_id));
      break;
  }
  if (s.state == SeqState::kRunning) Publish(s, &pending_states_);  // before its slot is reused
  s.table.Clear(*alloc_);
  for (int32_t slot : s.swap_slots) swap_.Release(slot);
  ReleaseStates(s);
  if (s.held) --n_held_;
  seqs_.erase(it);
}

int32_t Scheduler::n_tokens(int64_t seq_id) const {
  return static_cast<int32_t>(seqs_.at(seq_id).tokens.size());
}

int32_t Scheduler::CachedTokens(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : it->second.cached_tokens;
}

int64_t Scheduler::QueueMicros(int64_t seq_id) const {
  const Seq& s = seqs_.at(seq_id);
  return (s.first_scheduled_us >= 0 ? s.first_scheduled_us : Now()) - s.arrival_us;
}

double Scheduler::KvUsage() const {
  return alloc_->n_blocks() == 0 ? 0.0 : static_cast<double>(alloc_->n_used()) / alloc_->n_blocks();
}

double Scheduler::KvWaste() const {
  const int32_t bs = cfg_.block_size;
  // Only a sequence's last block can be partly filled; forks may share it (count it once).
  std::vector<std::pair<int32_t, int32_t>> last;  // (block, slots used)
  for (int64_t id : running_) {
    const Seq& s = seqs_.at(id);
    if (s.table.blocks.empty()) continue;
    const int32_t used = s.n_computed - (static_cast<int32_t>(s.table.blocks.size()) - 1) * bs;
    last.emplace_back(s.table.blocks.back(), used);
  }
  std::sort(last.begin(), last.end());
  last.erase(std::unique(last.begin(), last.end()), last.end());
  int64_t wasted = 0;
  for (const auto& [b, used] : last) wasted += bs - used;
  const int64_t slots = static_cast<int64_t>(alloc_->n_used()) * bs;
  return slots == 0 ? 0.0 : static_cast<double>(wasted) / static_cast<double>(slots);
}

// Full blocks whose KV is a pure function of the token chain: for a tiled prompt only those
// entirely inside the prompt (positions after it use the other numerics).
int32_t Scheduler::HashableBlocks(const Seq& s) const {
  const int32_t n = s.tiled_until > 0 ? s.tiled_until : static_cast<int32_t>(s.tokens.size());
  return n / cfg_.block_size;
}

void Scheduler::HashUpTo(Seq& s, int32_t n_blocks) {
  const int32_t bs = cfg_.block_size;
  for (int32_t i = static_cast<int32_t>(s.hashes.size()); i < n_blocks; ++i) {
    const uint64_t parent = i == 0 ? PrefixRootHash(s.tiled_until > 0) : s.hashes.back();
    s.hashes.push_back(PrefixBlockHash(
        parent, std::span<const int32_t>(s.tokens.data() + i * bs, static_cast<size_t>(bs))));
  }
}

void Scheduler::Publish(Seq& s, std::vector<BlockCopy>* state_out) {
  if (!cfg_.enable_prefix_caching) return;
  const int32_t upto = std::min(HashableBlocks(s), s.n_computed / cfg_.block_size);
  if (upto > s.n_published) {
    HashUpTo(s, upto);
    for (int32_t i = s.n_published; i < upto; ++i)
      alloc_->Publish(s.table.blocks[static_cast<size_t>(i)], s.hashes[static_cast<size_t>(i)]);
    s.n_published = upto;
  }
  // The state in the sequence's slot is at n_computed (every planned chunk ran). Only at the
  // end of a full cached block is it the state after that block's prefix.
  if (cfg_.state_snapshots <= 0 || s.state_slot < 0 || upto <= 0 ||
      upto * cfg_.block_size != s.n_computed)
    return;
  const uint64_t h = s.hashes[static_cast<size_t>(upto - 1)];
  if (alloc_->Lookup(h) < 0 || snapshots_.Find(h, *alloc_) >= 0) return;
  const int32_t slot = snapshots_.Take(h, *alloc_);
  if (slot >= 0) state_out->push_back({s.state_slot, slot});
}

// The block the next computed token lands in, if it is partly filled and shared: it must be
// copied before the write. -1 otherwise.
int32_t Scheduler::CowIndex(const Seq& s) const {
  if (s.n_computed % cfg_.block_size == 0) return -1;
  const int32_t i = s.n_computed / cfg_.block_size;
  if (i >= static_cast<int32_t>(s.table.blocks.size())) return -1;
  return alloc_->RefCount(s.table.blocks[static_cast<size_t>(i)]) > 1 ? i : -1;
}

bool Scheduler::EnsureBlocks(Seq& s, int32_t n, StepPlan* plan) {
  const int32_t need = std::max(0, BlockTable::BlocksFor(s.n_computed + n, cfg_.block_size) -
                                       static_cast<int32_t>(s.table.blocks.size()));
  const int32_t cow = CowIndex(s);
  if (need + (cow >= 0 ? 1 : 0) > alloc_->n_free()) return false;
  if (cow >= 0) {
    int32_t& slot = s.table.blocks[static_cast<size_t>(cow)];
    const int32_t fresh = alloc_->Allocate();
    plan->copies.push_back({slot, fresh});
    alloc_->Release(slot);
    slot = fresh;
  }
  for (int32_t i = 0; i < need; ++i) s.table.blocks.push_back(alloc_->Allocate());
  s.table.n_tokens = std::max(s.table.n_tokens, s.n_computed + n);
  return true;
}

// Tokens `s` could compute now with the free blocks.
int32_t Scheduler::Fit(const Seq& s) const {
  const int32_t blocks =
      static_cast<int32_t>(s.table.blocks.size()) + alloc_->n_free() - (CowIndex(s) >= 0 ? 1 : 0);
  return std::max(0, blocks * cfg_.block_size - s.n_computed);
}

Scheduler::Seq* Scheduler::NewestVictim(const Seq& s) {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    Seq& v = seqs_.at(*it);
    if (&v == &s || !Newer(v, s)) return nullptr;  // running_ is ordered: nothing newer left
    if (v.step_planned != step_) return &v;
  }
  return nullptr;
}

// Makes room for `n` tokens of `s` by preempting newer unplanned sequences. When none is left,
// a decode preempts itself (returns 0); a prefill shrinks its chunk to what fits.
int32_t Scheduler::MakeRoom(Seq& s, int32_t n, bool decode, StepPlan* plan) {
  while (!EnsureBlocks(s, n, plan)) {
    if (Seq* v = NewestVictim(s)) {
      Preempt(*v, plan);
      continue;
    }
    if (decode) {
      Preempt(s, plan);
      return 0;
    }
    n = std::min(n, Fit(s));
    if (n <= 0) return 0;
  }
  return n;
}

void Scheduler::Preempt(Seq& v, StepPlan* plan) {
  SHOAL_CHECK(v.state == SeqState::kRunning);
  Publish(v, &plan->state_copies);  // its computed prefix (and state) may survive in the cache
  Erase(running_, v.id);
  const int32_t n_blocks = static_cast<int32_t>(v.table.blocks.size());
  if (cfg_.swap_blocks > 0 && swap_.n_free() >= n_blocks) {
    for (int32_t b : v.table.blocks) {
      const int32_t slot = swap_.Allocate();
      plan->swap_out.push_back({b, slot});
      v.swap_slots.push_back(slot);
    }
    v.state = SeqState::kSwapped;
    swapped_.insert(
        std::upper_bound(swapped_.begin(), swapped_.end(), v.id,
                         [&](int64_t a, int64_t b) { return Newer(seqs_.at(b), seqs_.at(a)); }),
        v.id);
  } else {
    v.n_computed = 0;
    v.state = SeqState::kWaiting;
    ReleaseStates(v);           // recompute rebuilds the state from position 0
    waiting_.push_front(v.id);  // victims go newest first, so older ones end up in front
  }
  v.table.Clear(*alloc_);
  v.n_published = 0;
  plan->preempted.push_back(v.id);
  ++preemptions_;
}

void Scheduler::DropAllKv() {
  std::vector<int64_t> back;  // running and swapped sequences, oldest first
  for (int64_t id : running_) back.push_back(id);
  for (int64_t id : swapped_) back.push_back(id);
  std::sort(back.begin(), back.end(),
            [&](int64_t a, int64_t b) { return Newer(seqs_.at(b), seqs_.at(a)); });
  for (auto it = back.rbegin(); it != back.rend(); ++it) {
    Seq& s = seqs_.at(*it);
    kv_dropped_tokens_ += s.n_computed;
    s.table.Clear(*alloc_);
    for (int32_t slot : s.swap_slots) swap_.Release(slot);
    s.swap_slots.clear();
    ReleaseStates(s);  // the recurrent state is rebuilt from position 0 too
    s.n_computed = 0;
    s.n_published = 0;
    s.state = SeqState::kWaiting;
    waiting_.push_front(s.id);  // newest pushed first: the oldest ends up in front
  }
  running_.clear();
  swapped_.clear();
  pending_states_.clear();  // fork copies between slots just released
  alloc_->DropCache();
  snapshots_.Clear();  // the state slots are gone with the KV rows
  ++kv_drops_;
}

void Scheduler::PlanChunk(Seq& s, int32_t n, StepPlan* plan, int32_t* budget) {
  const bool samples = s.n_computed + n == static_cast<int32_t>(s.tokens.size());
  plan->chunks.push_back({s.id, s.n_computed, n, samples, s.tiled_until, s.state_slot});
  s.n_computed += n;
  *budget -= n;
  s.step_planned = step_;
  if (s.first_scheduled_us < 0) s.first_scheduled_us = Now();
}

void Scheduler::InsertRunning(int64_t id) {
  const Seq& s = seqs_.at(id);
  running_.insert(std::upper_bound(running_.begin(), running_.end(), id,
                                   [&](int64_t, int64_t b) { return Newer(seqs_.at(b), s); }),
                  id);
}

void Scheduler::Erase(std::vector<int64_t>& v, int64_t id) {
  v.erase(std::find(v.begin(), v.end(), id));
}

bool Scheduler::TrySwapIn(Seq& s, int32_t* budget, StepPlan* plan) {
  const int32_t n = std::min(static_cast<int32_t>(s.tokens.size()) - s.n_computed, *budget);
  const int32_t held = static_cast<int32_t>(s.swap_slots.size());
  const int32_t need = std::max(held, BlockTable::BlocksFor(s.n_computed + n, cfg_.block_size));
  if (n <= 0 || need > alloc_->n_free()) return false;
  for (int32_t slot : s.swap_slots) {
    const int32_t b = alloc_->Allocate();
    plan->swap_in.push_back({slot, b});
    s.table.blocks.push_back(b);
    swap_.Release(slot);  // safe: no swap-out shares this step
  }
  s.swap_slots.clear();
  s.state = SeqState::kRunning;
  InsertRunning(s.id);
  SHOAL_CHECK(EnsureBlocks(s, n, plan));
  PlanChunk(s, n, plan, budget);
  return true;
}

bool Scheduler::TryAdmit(Seq& s, int32_t* budget, StepPlan* plan) {
  const int32_t bs = cfg_.block_size;
  const int32_t n_tokens = static_cast<int32_t>(s.tokens.size());
  // The longest chain of cached full blocks, leaving at least the last token to compute (its
  // logits are needed).
  std::vector<int32_t> hit;
  if (cfg_.enable_prefix_caching) {
    const int32_t limit = std::min(HashableBlocks(s), (n_tokens - 1) / bs);
    HashUpTo(s, limit);
    for (int32_t i = 0; i < limit; ++i) {
      const int32_t b = alloc_->Lookup(s.hashes[static_cast<size_t>(i)]);
      if (b < 0) break;
      hit.push_back(b);
    }
  }
  // A recurrent state resumes only where a snapshot holds it: the longest hit ending on one.
  int32_t snap = -1;
  if (cfg_.state_snapshots > 0) {
    while (!hit.empty() && (snap = snapshots_.Find(s.hashes[hit.size() - 1], *alloc_)) < 0)
      hit.pop_back();
  }
  const int32_t n_cached = static_cast<int32_t>(hit.size()) * bs;
  const int32_t n = std::min(n_tokens - n_cached, *budget);
  int32_t revive = 0;
  for (int32_t b : hit) revive += alloc_->RefCount(b) == 0;
  const int32_t need =
      BlockTable::BlocksFor(n_cached + n, bs) - static_cast<int32_t>(hit.size()) + revive;
  if (n <= 0 || need > alloc_->n_free()) return false;
  // With state slots: one for the sequence and one per fork still to come (a parent preempted
  // after forking needs only its own).
  const int32_t n_states = cfg_.state_slots > 0 ? 1 + s.n_forks : 0;
  if (n_states > static_cast<int32_t>(free_states_.size())) return false;
  if (n_states > 0) {
    s.state_slot = TakeState();
    for (int32_t i = 1; i < n_states; ++i) s.reserved_states.push_back(TakeState());
  }
  if (!hit.empty() && snap >= 0) {  // before this step's chunks, after the snapshots taken
    plan->state_copies.push_back({snap, s.state_slot});
    snapshots_.Touch(snap);
  }
  for (int32_t b : hit) {
    alloc_->AddRef(b);  // before any Allocate, which could evict it
    s.table.blocks.push_back(b);
  }
  s.n_computed = n_cached;
  s.n_published = static_cast<int32_t>(hit.size());
  if (cfg_.enable_prefix_caching) {
    prefix_queries_ += n_tokens;
    prefix_hits_ += n_cached;
  }
  if (!s.admitted_once) s.cached_tokens = n_cached;
  s.admitted_once = true;
  s.state = SeqState::kRunning;
  waiting_.pop_front();
  InsertRunning(s.id);
  SHOAL_CHECK(EnsureBlocks(s, n, plan));
  PlanChunk(s, n, plan, budget);
  return true;
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  plan.state_copies = std::move(pending_states_);  // before any chunk of this step runs
  pending_states_.clear();
  ++step_;
  int32_t budget = cfg_.max_num_batched_tokens;
  for (int64_t id : running_)  // computed by the step that just ran
    Publish(seqs_.at(id), &plan.state_copies);
  const std::vector<int64_t> snapshot = running_;
  // 1. Decodes, oldest first: one token each.
  for (int64_t id : snapshot) {
    Seq& s = seqs_.at(id);
    if (s.state != SeqState::kRunning || s.held || s.tokens.size() - s.n_computed != 1) continue;
    if (budget < 1) break;
    if (MakeRoom(s, 1, true, &plan) == 1) PlanChunk(s, 1, &plan, &budget);
  }
  // 2. Prefills already under way (chunked), oldest first.
  for (int64_t id : snapshot) {
    Seq& s = seqs_.at(id);
    const int32_t left = static_cast<int32_t>(s.tokens.size()) - s.n_computed;
    if (s.state != SeqState::kRunning || s.held || s.step_planned == step_ || left <= 1) continue;
    if (budget < 1) break;
    const int32_t n = MakeRoom(s, std::min(left, budget), false, &plan);
    if (n > 0) PlanChunk(s, n, &plan, &budget);
  }
  // 3. Swapped-out sequences come back (never in a step that swapped something out).
  if (plan.preempted.empty()) {
    while (!swapped_.empty() && n_running() < cfg_.max_num_seqs && budget >= 1) {
      Seq& s = seqs_.at(swapped_.front());
      if (!TrySwapIn(s, &budget, &plan)) break;
      swapped_.erase(swapped_.begin());
    }
  }
  // 4. New (or recompute-preempted) sequences, FCFS: stop at the first that does not fit.
  if (plan.preempted.empty() && swapped_.empty()) {
    while (!waiting_.empty() && n_running() < cfg_.max_num_seqs && budget >= 1) {
      if (!TryAdmit(seqs_.at(waiting_.front()), &budget, &plan)) break;
    }
  }
  return plan;
}

}  // namespace shoal
