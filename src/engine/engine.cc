// Engine step loop: schedule -> copy blocks -> build batch -> execute -> sample (fork) -> report.
#include "engine/engine.h"

#include <algorithm>

#include "engine/logprobs.h"

namespace shoal {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kEos:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "?";
}

namespace {

SchedConfig MakeSchedConfig(const EngineConfig& cfg, int32_t kv_blocks, int32_t groups) {
  SchedConfig s;
  s.block_size = cfg.block_size;
  s.max_num_seqs = std::max(1, cfg.max_num_seqs / groups);
  s.max_num_batched_tokens = cfg.max_num_batched_tokens;
  // A sequence must always fit the pool alone, or preemption could never make room for it.
  s.max_model_len = std::min<int64_t>(cfg.n_ctx, int64_t{kv_blocks} * cfg.block_size);
  s.enable_prefix_caching = cfg.enable_prefix_caching;
  s.swap_blocks = cfg.swap_blocks / groups;
  s.tiled_prompt_min = kTiledPromptMin;
  s.state_slots = cfg.state_slots;  // one group when there are state slots (Engine::Engine)
  s.state_snapshots = cfg.state_snapshots;
  return s;
}

}  // namespace

Engine::Engine(std::unique_ptr<Executor> exec, const EngineConfig& cfg, int32_t kv_blocks,
               std::vector<int32_t> eog_ids, const Clock* clock)
    : cfg_(cfg), exec_(std::move(exec)), kv_blocks_(kv_blocks), eog_(std::move(eog_ids)) {
  // Each group needs room for one full sequence; fewer groups when the pool is too small.
  const int64_t per_seq = BlockTable::BlocksFor(cfg.n_ctx, cfg.block_size);
  int32_t g = std::max(1, std::min(cfg.pipeline_groups, std::max(1, cfg.max_num_seqs)));
  while (g > 1 && kv_blocks / g < per_seq) --g;
  if (cfg.state_slots > 0) g = 1;  // state slot ids are the executor's: one group owns them all
  cfg_.pipeline_groups = g;
  const int32_t per_group = kv_blocks / g;
  for (int32_t i = 0; i < g; ++i) {
    Group gr;
    gr.block_base = i * per_group;
    gr.swap_base = i * (cfg.swap_blocks / g);
    gr.alloc = std::make_unique<BlockAllocator>(per_group);
    gr.sched = std::make_unique<Scheduler>(MakeSchedConfig(cfg, per_group, g), gr.alloc.get(),
                                           clock ? clock : &steady_);
    groups_.push_back(std::move(gr));
  }
  cfg_.n_ctx = groups_[0].sched->config().max_model_len;
}

bool Engine::idle() const {
  if (!flight_.empty()) return false;
  for (const Group& g : groups_)
    if (!g.sched->idle()) return false;
  return true;
}

Result<int64_t> Engine::Add(Request req) {
  SHOAL_RETURN_IF_ERROR(req.sampling.Validate());
  if (req.n < 1 || req.n > kMaxChoices)
    return Errorf("n must be in [1, {}], got {}", kMaxChoices, req.n);
  if (req.logprobs < -1 || req.logprobs > kMaxLogprobs)
    return Errorf("logprobs must be in [0, {}], got {}", kMaxLogprobs, req.logprobs);
  for (int32_t t : req.prompt)
    if (t < 0 || t >= exec_->n_vocab()) return Errorf("prompt token {} out of range", t);
  // The group with the fewest sequences (lowest index on ties) takes the request.
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(groups_.size()); ++i)
    if (groups_[static_cast<size_t>(i)].sched->n_seqs() <
        groups_[static_cast<size_t>(best)].sched->n_seqs())
      best = i;
  const int64_t seq = next_seq_;
  Live l;
  l.n_prompt = static_cast<int32_t>(req.prompt.size());
  SHOAL_RETURN_IF_ERROR(groups_[static_cast<size_t>(best)].sched->Add(seq, std::move(req.prompt),
                                                                      req.n, req.prompted));
  const int64_t id = next_id_++;
  ++next_seq_;
  group_of_[seq] = best;
  l.logprobs = req.logprobs;
  l.seqs.assign(static_cast<size_t>(req.n), -1);
  l.seqs[0] = seq;
  l.n_live = 1;
  for (int32_t i = 0; i < req.n; ++i) {
    SamplingParams p = req.sampling;
    p.seed += static_cast<uint64_t>(i);
    l.samplers.push_back(std::make_unique<Sampler>(p, static_cast<int32_t>(exec_->n_vocab())));
  }
  l.params = std::move(req.sampling);
  reqs_.emplace(id, std::move(l));
  owner_[seq] = {id, 0};
  return id;
}

void Engine::FinishSeq(int64_t seq) {
  SchedOf(seq).Finish(seq);
  owner_.erase(seq);
  group_of_.erase(seq);
}

void Engine::FinishChoice(int64_t req_id, Live& r, int32_t index) {
  const int64_t seq = r.seqs[static_cast<size_t>(index)];
  FinishSeq(seq);
  r.seqs[static_cast<size_t>(index)] = -1;
  if (--r.n_live == 0) reqs_.erase(req_id);
}

void Engine::Cancel(int64_t id) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return;
  for (int64_t seq : it->second.seqs) {
    if (seq < 0) continue;
    FinishSeq(seq);
  }
  reqs_.erase(it);
}

void Engine::Hold(int64_t id, bool held) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return;
  for (int64_t seq : it->second.seqs)
    if (seq >= 0) SchedOf(seq).Hold(seq, held);  // forks copy the flag from their parent
}

bool Engine::has_work() const {
  if (!flight_.empty()) return true;
  for (const Group& g : groups_)
    if (g.sched->n_unheld() > 0) return true;
  return false;
}

void Engine::CancelChoice(int64_t id, int32_t index) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return;
  Live& r = it->second;
  if (!r.sampled || r.seqs.size() == 1) {
    Cancel(id);
    return;
  }
  if (index < 0 || index >= static_cast<int32_t>(r.seqs.size()) ||
      r.seqs[static_cast<size_t>(index)] < 0)
    return;
  FinishChoice(id, r, index);
}

int32_t Engine::CachedTokens(int64_t id) const {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return 0;
  if (it->second.sampled) return it->second.cached_tokens;
  return SchedOf(it->second.seqs[0]).CachedTokens(it->second.seqs[0]);
}

const std::vector<int32_t>& Engine::Tokens(int64_t id, int32_t index) const {
  const int64_t seq = reqs_.at(id).seqs.at(static_cast<size_t>(index));
  return SchedOf(seq).Tokens(seq);
}

EngineStats Engine::stats() const {
  EngineStats s;
  double used = 0, waste_num = 0, waste_den = 0;
  for (const Group& g : groups_) {
    const Scheduler& sc = *g.sched;
    s.n_running += sc.n_running();
    s.n_waiting += sc.n_waiting();
    s.n_swapped += sc.n_swapped();
    const double n = g.alloc->n_blocks();
    used += sc.KvUsage() * n;
    s.preemptions_total += sc.preemptions_total();
    s.prefix_queries_total += sc.prefix_queries_total();
    s.prefix_hits_total += sc.prefix_hits_total();
    s.kv_losses_total += sc.kv_drops_total();
    s.replayed_tokens_total += sc.kv_dropped_tokens_total();
    waste_num += sc.KvWaste() * sc.KvUsage() * n;  // weighted by blocks in use
    waste_den += sc.KvUsage() * n;
  }
  s.kv_usage = kv_blocks_ > 0 ? used / kv_blocks_ : 0;
  s.kv_waste = waste_den > 0 ? waste_num / waste_den : 0;
  s.prompt_tokens_total = prompt_tokens_;
  s.generation_tokens_total = generation_tokens_;
  return s;
}

void Engine::SampleChoice(int64_t req_id, Live& r, int32_t index, const float* lg,
                          std::vector<TokenEvent>* events) {
  const int64_t seq = r.seqs[static_cast<size_t>(index)];
  Scheduler& sched = SchedOf(seq);
  const std::vector<int32_t>& toks = sched.Tokens(seq);
  const int64_t V = exec_->n_vocab();
  TokenEvent ev;
  ev.id = req_id;
  ev.index = index;
  ev.token = r.samplers[static_cast<size_t>(index)]->Sample(lg, toks);
  if (r.logprobs >= 0)
    ComputeLogprobs(lg, V, ev.token, r.logprobs, &ev.logprob, &ev.top_logprobs, &scratch_);
  if (cfg_.return_logits) ev.logits.assign(lg, lg + V);
  const int32_t n_total = static_cast<int32_t>(toks.size()) + 1;
  const int32_t n_gen = n_total - r.n_prompt;
  ++generation_tokens_;
  const bool eog = std::find(eog_.begin(), eog_.end(), ev.token) != eog_.end();
  if (eog && !r.params.ignore_eos) {
    ev.finish = FinishReason::kEos;
  } else if ((r.params.max_tokens >= 0 && n_gen >= r.params.max_tokens) || n_total >= cfg_.n_ctx) {
    ev.finish = FinishReason::kLength;
  }
  events->push_back(std::move(ev));
  if (events->back().finish != FinishReason::kNone) {
    FinishChoice(req_id, r, index);  // may erase the request: r is dead after this
  } else {
    sched.AppendToken(seq, events->back().token);
  }
}

Status Engine::SubmitGroup(int32_t gi) {
  Group& g = groups_[static_cast<size_t>(gi)];
  g.plan = g.sched->Schedule();
  // Group-local block and swap ids -> the executor's (global) ids.
  auto shifted = [](const std::vector<BlockCopy>& v, int32_t src_base, int32_t dst_base,
                    std::vector<BlockCopy>* out) {
    for (BlockCopy c : v) out->push_back({c.src + src_base, c.dst + dst_base});
  };
  StepInput& in = g.input;
  in.Clear();
  in.AppendCopies(carry_);
  carry_.Clear();
  shifted(g.plan.swap_out, g.block_base, g.swap_base, &in.swap_out);
  shifted(g.plan.copies, g.block_base, g.block_base, &in.copies);
  shifted(g.plan.swap_in, g.swap_base, g.block_base, &in.swap_in);
  in.state_copies.insert(in.state_copies.end(), g.plan.state_copies.begin(),
                         g.plan.state_copies.end());
  if (g.plan.chunks.empty()) {
    // Nothing to run (a plan that only swaps out): its copies go with the next step.
    carry_.AppendCopies(in);
    return Status::Ok();
  }
  g.tables.resize(g.plan.chunks.size());
  for (size_t i = 0; i < g.plan.chunks.size(); ++i) {
    const ScheduledChunk& c = g.plan.chunks[i];
    const std::vector<int32_t>& toks = g.sched->Tokens(c.seq_id);
    const std::span<const int32_t> ids(toks.data() + c.start, static_cast<size_t>(c.n));
    const std::vector<int32_t>& local = g.sched->Table(c.seq_id).blocks;
    g.tables[i].resize(local.size());
    for (size_t b = 0; b < local.size(); ++b) g.tables[i][b] = local[b] + g.block_base;
    in.batch.Add(c.seq_id, ids, c.start, g.tables[i], c.samples, false, c.tiled_until,
                 c.state_slot);
  }
  SHOAL_RETURN_IF_ERROR(exec_->Submit(in));
  g.in_flight = true;
  flight_.push_back(gi);
  return Status::Ok();
}

Result<std::vector<TokenEvent>> Engine::Step() {
  std::vector<TokenEvent> events;
  // Start every group that has nothing in flight (round robin from the one after the last
  // collected), so up to pipeline_groups steps overlap; then finish the oldest one.
  const int32_t G = static_cast<int32_t>(groups_.size());
  for (int32_t k = 0; k < G; ++k) {
    const int32_t gi = (next_group_ + k) % G;
    Group& g = groups_[static_cast<size_t>(gi)];
    if (g.in_flight || g.sched->idle()) continue;
    SHOAL_RETURN_IF_ERROR(SubmitGroup(gi));
  }
  if (flight_.empty()) return events;
  const int32_t gi = flight_.front();
  flight_.pop_front();
  next_group_ = (gi + 1) % G;
  SHOAL_RETURN_IF_ERROR(CollectGroup(gi, &events));
  return events;
}

void Engine::DropAllKv() {
  // The steps in flight are void (no token is sampled from them, so none is duplicated or
  // skipped) and every sequence is recomputed from its tokens.
  for (Group& g : groups_) {
    g.sched->DropAllKv();
    g.in_flight = false;
  }
  flight_.clear();
  carry_.Clear();  // its swap-outs described blocks that are gone
}

Status Engine::CollectGroup(int32_t gi, std::vector<TokenEvent>* events) {
  Group& g = groups_[static_cast<size_t>(gi)];
  g.in_flight = false;
  SHOAL_RETURN_IF_ERROR(exec_->Collect(&out_));
  if (out_.kv_lost) {
    DropAllKv();
    return Status::Ok();
  }
  const int64_t V = exec_->n_vocab();
  size_t out_i = 0;
  for (const ScheduledChunk& c : g.plan.chunks) {
    if (!c.samples) continue;
    const float* lg = out_.logits.data() + static_cast<int64_t>(out_i++) * V;
    // A sequence cancelled while its step was in flight has nothing left to sample.
    auto own = owner_.find(c.seq_id);
    if (own == owner_.end()) continue;
    const auto [req_id, index] = own->second;
    Live& r = reqs_.at(req_id);
    if (r.sampled) {
      SampleChoice(req_id, r, index, lg, events);
      continue;
    }
    // First token: count the prompt, then fork the other choices off the prefilled prompt.
    r.sampled = true;
    r.cached_tokens = g.sched->CachedTokens(c.seq_id);
    prompt_tokens_ += r.n_prompt;
    const int32_t n = static_cast<int32_t>(r.seqs.size());
    for (int32_t i = 1; i < n; ++i) {
      const int64_t child = next_seq_++;
      SHOAL_RETURN_IF_ERROR(g.sched->Fork(c.seq_id, child));
      r.seqs[static_cast<size_t>(i)] = child;
      owner_[child] = {req_id, i};
      group_of_[child] = gi;
    }
    r.n_live = n;
    for (int32_t i = 0; i < n; ++i) {
      // SampleChoice may erase the request when its last choice finishes.
      Live& rr = reqs_.at(req_id);
      SampleChoice(req_id, rr, i, lg, events);
      if (i + 1 < n && !reqs_.count(req_id)) break;
    }
  }
  return Status::Ok();
}

}  // namespace shoal
