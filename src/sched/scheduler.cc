// Scheduler: FCFS continuous batching with chunked prefill.
#include "sched/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace shoal {

Scheduler::Scheduler(const SchedConfig& cfg, BlockAllocator* alloc) : cfg_(cfg), alloc_(alloc) {}

Status Scheduler::Add(int64_t seq_id, int32_t n_prompt) {
  if (seqs_.count(seq_id)) return Errorf("sequence {} already exists", seq_id);
  if (n_prompt <= 0) return Errorf("sequence {}: empty prompt", seq_id);
  if (n_prompt > cfg_.max_model_len)
    return Errorf("prompt of {} tokens exceeds the maximum model length {}", n_prompt,
                  cfg_.max_model_len);
  if (BlockTable::BlocksFor(n_prompt, cfg_.block_size) > alloc_->n_blocks())
    return Errorf("prompt of {} tokens needs more KV blocks than the cache has ({})", n_prompt,
                  alloc_->n_blocks());
  Seq s;
  s.id = seq_id;
  s.order = next_order_++;
  s.n_tokens = n_prompt;
  seqs_.emplace(seq_id, std::move(s));
  return Status::Ok();
}

void Scheduler::AppendToken(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  SHOAL_CHECK(it != seqs_.end());
  ++it->second.n_tokens;
}

void Scheduler::Finish(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  it->second.table.Clear(*alloc_);
  seqs_.erase(it);
}

const BlockTable& Scheduler::Table(int64_t seq_id) const { return seqs_.at(seq_id).table; }

int32_t Scheduler::n_tokens(int64_t seq_id) const { return seqs_.at(seq_id).n_tokens; }

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  std::vector<Seq*> order;
  for (auto& [id, s] : seqs_) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](Seq* a, Seq* b) { return a->order < b->order; });
  int32_t budget = cfg_.max_num_batched_tokens;
  auto plan_chunk = [&](Seq* s, int32_t n) {
    if (n <= 0 || static_cast<int32_t>(plan.chunks.size()) >= cfg_.max_num_seqs) return;
    if (!s->table.Reserve(*alloc_, s->n_computed + n, cfg_.block_size).ok()) return;
    ScheduledChunk c{s->id, s->n_computed, n, s->n_computed + n == s->n_tokens};
    s->n_computed += n;
    budget -= n;
    plan.chunks.push_back(c);
  };
  // Decodes first: a running sequence (prompt done) has exactly one token to compute.
  for (Seq* s : order)
    if (s->n_computed > 0 && s->n_tokens - s->n_computed == 1 && budget >= 1) plan_chunk(s, 1);
  // Then prefills (new sequences and partly prefilled ones), chunked to the remaining budget.
  for (Seq* s : order) {
    const int32_t left = s->n_tokens - s->n_computed;
    if (left <= 0 || (s->n_computed > 0 && left == 1)) continue;
    plan_chunk(s, std::min(left, budget));
  }
  return plan;
}

}  // namespace shoal
