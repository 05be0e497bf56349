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

Status LocalExecutor::Run(const Batch& batch, std::vector<float>* logits) {
  SHOAL_RETURN_IF_ERROR(model_->Forward(batch, nullptr, kv_, &pool_, &out_));
  logits->swap(out_.logits);
  return Status::Ok();
}

Status LocalExecutor::CopyBlocks(std::span<const BlockCopy> swap_out,
                                 std::span<const BlockCopy> copies,
                                 std::span<const BlockCopy> swap_in) {
  if ((!swap_out.empty() || !swap_in.empty()) && !swap_)
    return Errorf("swap requested but the executor has no swap space");
  for (const BlockCopy& c : swap_out) CopyKvBlock(kv_, c.src, *swap_, c.dst);
  for (const BlockCopy& c : copies) CopyKvBlock(kv_, c.src, kv_, c.dst);
  for (const BlockCopy& c : swap_in) CopyKvBlock(*swap_, c.src, kv_, c.dst);
  return Status::Ok();
}

Status LocalExecutor::CopyStates(std::span<const BlockCopy> copies) {
  const int32_t n = kv_.layout().n_state_slots;
  for (const BlockCopy& c : copies) {
    if (c.src < 0 || c.src >= n || c.dst < 0 || c.dst >= n)
      return Errorf("state copy {} -> {} outside the {} state slots", c.src, c.dst, n);
    kv_.CopyState(c.src, c.dst);
  }
  return Status::Ok();
}

Result<std::unique_ptr<Engine>> Engine::Create(Model* model, const EngineConfig& cfg_in,
                                               std::vector<int32_t> eog_ids) {
  EngineConfig cfg = cfg_in;
  if (!model->is_first_stage() || !model->is_last_stage())
    return Errorf("a local engine needs the whole model, got layers [{}, {})", model->first_layer(),
                  model->last_layer());
  if (cfg.n_threads <= 0) cfg.n_threads = HardwareThreads();
  if (cfg.block_size <= 0) return Errorf("block size must be positive");
  if (cfg.n_ctx <= 0) return Errorf("context length must be positive");
  if (cfg.swap_blocks < 0) return Errorf("swap blocks must be >= 0");
  // A per-sequence recurrent state lives in slots beside the KV pool, one per running sequence.
  cfg.state_slots = model->StateFloatsPerSeq() > 0 ? std::max(1, cfg.max_num_seqs) : 0;
  if (cfg.state_slots > 0) cfg.swap_blocks = 0;  // preemption by recompute rebuilds the state
  const int64_t per_seq = BlockTable::BlocksFor(cfg.n_ctx, cfg.block_size);
  const uint64_t block_bytes =
      std::max<uint64_t>(1, model->MakeKvLayout(1, cfg.block_size, cfg.kv_dtype).BytesPerBlock());
  int64_t blocks = cfg.kv_blocks;
  if (cfg.kv_mem_bytes > 0) {
    blocks = static_cast<int64_t>(cfg.kv_mem_bytes / block_bytes);
  } else if (blocks <= 0) {
    // Room for every sequence at full context, capped at 1 GiB of KV by default.
    const int64_t cap = (int64_t{1} << 30) / static_cast<int64_t>(block_bytes);
    blocks = std::max<int64_t>(per_seq, std::min(per_seq * cfg.max_num_seqs, cap));
  }
  if (blocks < per_seq)
    return Errorf(
        "the KV pool of {} blocks ({} bytes each) holds {} tokens, less than one sequence of the "
        "context length {}: raise the KV memory or lower the context",
        blocks, block_bytes, blocks * cfg.block_size, cfg.n_ctx);
  if (blocks > INT32_MAX) return Errorf("KV pool of {} blocks is too large", blocks);
  const auto n_blocks = static_cast<int32_t>(blocks);
  SHOAL_ASSIGN_OR_RETURN(KvStore kv, KvStore::Create(model->MakeKvLayout(
                                         n_blocks, cfg.block_size, cfg.kv_dtype, cfg.state_slots)));
  std::optional<KvStore> swap;
  if (cfg.swap_blocks > 0) {
    SHOAL_ASSIGN_OR_RETURN(
        swap, KvStore::Create(model->MakeKvLayout(cfg.swap_blocks, cfg.block_size, cfg.kv_dtype)));
  }
  auto exec = std::make_unique<LocalExecutor>(model, std::move(kv), std::move(swap), cfg.n_threads);
  return std::make_unique<Engine>(std::move(exec), cfg, n_blocks, std::move(eog_ids));
}

namespace {

SchedConfig MakeSchedConfig(const EngineConfig& cfg, int32_t kv_blocks) {
  SchedConfig s;
  s.block_size = cfg.block_size;
  s.max_num_seqs = cfg.max_num_seqs;
  s.max_num_batched_tokens = cfg.max_num_batched_tokens;
  // A sequence must always fit the pool alone, or preemption could never make room for it.
  s.max_model_len = std::min<int64_t>(cfg.n_ctx, int64_t{kv_blocks} * cfg.block_size);
  s.enable_prefix_caching = cfg.enable_prefix_caching;
  s.swap_blocks = cfg.swap_blocks;
  s.tiled_prompt_min = kTiledPromptMin;
  s.state_slots = cfg.state_slots;
  return s;
}

}  // namespace

Engine::Engine(std::unique_ptr<Executor> exec, const EngineConfig& cfg, int32_t kv_blocks,
               std::vector<int32_t> eog_ids, const Clock* clock)
    : cfg_(cfg),
      exec_(std::move(exec)),
      alloc_(kv_blocks),
      sched_(MakeSchedConfig(cfg, kv_blocks), &alloc_, clock ? clock : &steady_),
      eog_(std::move(eog_ids)) {
  cfg_.n_ctx = sched_.config().max_model_len;
}

Result<int64_t> Engine::Add(Request req) {
  SHOAL_RETURN_IF_ERROR(req.sampling.Validate());
  if (req.n < 1 || req.n > kMaxChoices)
    return Errorf("n must be in [1, {}], got {}", kMaxChoices, req.n);
  if (req.logprobs < -1 || req.logprobs > kMaxLogprobs)
    return Errorf("logprobs must be in [0, {}], got {}", kMaxLogprobs, req.logprobs);
  for (int32_t t : req.prompt)
    if (t < 0 || t >= exec_->n_vocab()) return Errorf("prompt token {} out of range", t);
  const int64_t id = next_id_++;
  const int64_t seq = next_seq_++;
  Live l;
  l.n_prompt = static_cast<int32_t>(req.prompt.size());
  SHOAL_RETURN_IF_ERROR(sched_.Add(seq, std::move(req.prompt), req.n));
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

void Engine::FinishChoice(int64_t req_id, Live& r, int32_t index) {
  const int64_t seq = r.seqs[static_cast<size_t>(index)];
  sched_.Finish(seq);
  owner_.erase(seq);
  r.seqs[static_cast<size_t>(index)] = -1;
  if (--r.n_live == 0) reqs_.erase(req_id);
}

void Engine::Cancel(int64_t id) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return;
  for (int64_t seq : it->second.seqs) {
    if (seq < 0) continue;
    sched_.Finish(seq);
    owner_.erase(seq);
  }
  reqs_.erase(it);
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
  return sched_.CachedTokens(it->second.seqs[0]);
}

const std::vector<int32_t>& Engine::Tokens(int64_t id, int32_t index) const {
  return sched_.Tokens(reqs_.at(id).seqs.at(static_cast<size_t>(index)));
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.n_running = sched_.n_running();
  s.n_waiting = sched_.n_waiting();
  s.n_swapped = sched_.n_swapped();
  s.kv_usage = sched_.KvUsage();
  s.prompt_tokens_total = prompt_tokens_;
  s.generation_tokens_total = generation_tokens_;
  s.preemptions_total = sched_.preemptions_total();
  s.prefix_queries_total = sched_.prefix_queries_total();
  s.prefix_hits_total = sched_.prefix_hits_total();
  s.kv_waste = sched_.KvWaste();
  s.kv_losses_total = sched_.kv_drops_total();
  s.replayed_tokens_total = sched_.kv_dropped_tokens_total();
  return s;
}

void Engine::SampleChoice(int64_t req_id, Live& r, int32_t index, const float* lg,
                          std::vector<TokenEvent>* events) {
  const int64_t seq = r.seqs[static_cast<size_t>(index)];
  const std::vector<int32_t>& toks = sched_.Tokens(seq);
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
    sched_.AppendToken(seq, events->back().token);
  }
}

Result<std::vector<TokenEvent>> Engine::Step() {
  std::vector<TokenEvent> events;
  const StepPlan plan = sched_.Schedule();
  // A KV loss in the executor voids this step: no token is sampled from it (so none is
  // duplicated or skipped), and every sequence is recomputed from its tokens.
  const auto kv_lost = [&] {
    if (exec_->kv_epoch() == kv_epoch_) return false;
    kv_epoch_ = exec_->kv_epoch();
    sched_.DropAllKv();
    return true;
  };
  if (!plan.swap_out.empty() || !plan.copies.empty() || !plan.swap_in.empty()) {
    const Status s = exec_->CopyBlocks(plan.swap_out, plan.copies, plan.swap_in);
    if (kv_lost()) return events;
    SHOAL_RETURN_IF_ERROR(s);
  }
  if (!plan.state_copies.empty()) SHOAL_RETURN_IF_ERROR(exec_->CopyStates(plan.state_copies));
  if (plan.chunks.empty()) return events;
  batch_.Clear();
  for (const ScheduledChunk& c : plan.chunks) {
    const std::vector<int32_t>& toks = sched_.Tokens(c.seq_id);
    const std::span<const int32_t> ids(toks.data() + c.start, static_cast<size_t>(c.n));
    batch_.Add(c.seq_id, ids, c.start, sched_.Table(c.seq_id).blocks, c.samples, false,
               c.tiled_until, c.state_slot);
  }
  const Status run = exec_->Run(batch_, &logits_);
  if (kv_lost()) return events;
  SHOAL_RETURN_IF_ERROR(run);
  const int64_t V = exec_->n_vocab();
  size_t out_i = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    if (!c.samples) continue;
    const float* lg = logits_.data() + static_cast<int64_t>(out_i++) * V;
    const auto [req_id, index] = owner_.at(c.seq_id);
    Live& r = reqs_.at(req_id);
    if (r.sampled) {
      SampleChoice(req_id, r, index, lg, &events);
      continue;
    }
    // First token: count the prompt, then fork the other choices off the prefilled prompt.
    r.sampled = true;
    r.cached_tokens = sched_.CachedTokens(c.seq_id);
    prompt_tokens_ += r.n_prompt;
    const int32_t n = static_cast<int32_t>(r.seqs.size());
    for (int32_t i = 1; i < n; ++i) {
      const int64_t child = next_seq_++;
      SHOAL_RETURN_IF_ERROR(sched_.Fork(c.seq_id, child));
      r.seqs[static_cast<size_t>(i)] = child;
      owner_[child] = {req_id, i};
    }
    r.n_live = n;
    for (int32_t i = 0; i < n; ++i) {
      // SampleChoice may erase the request when its last choice finishes.
      Live& rr = reqs_.at(req_id);
      SampleChoice(req_id, rr, i, lg, &events);
      if (i + 1 < n && !reqs_.count(req_id)) break;
    }
  }
  return events;
}

}  // namespace shoal
