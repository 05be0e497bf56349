// Engine step loop: schedule -> build batch -> execute -> sample -> report.
#include "engine/engine.h"

#include <algorithm>
#include <cmath>

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

Result<std::unique_ptr<Engine>> Engine::Create(Model* model, const EngineConfig& cfg_in,
                                               std::vector<int32_t> eog_ids) {
  EngineConfig cfg = cfg_in;
  if (!model->is_first_stage() || !model->is_last_stage())
    return Errorf("a local engine needs the whole model, got layers [{}, {})", model->first_layer(),
                  model->last_layer());
  if (cfg.n_threads <= 0) cfg.n_threads = HardwareThreads();
  if (cfg.block_size <= 0) return Errorf("block size must be positive");
  int32_t blocks = cfg.kv_blocks;
  if (cfg.kv_mem_bytes > 0)
    blocks = static_cast<int32_t>(
        cfg.kv_mem_bytes / model->MakeKvLayout(1, cfg.block_size, cfg.kv_dtype).BytesPerBlock());
  if (blocks <= 0) {
    // Room for every sequence at full context, capped at 1 GiB of KV by default.
    const int64_t per_seq = BlockTable::BlocksFor(cfg.n_ctx, cfg.block_size);
    const KvLayout one = model->MakeKvLayout(1, cfg.block_size, cfg.kv_dtype);
    const int64_t cap = (int64_t{1} << 30) / std::max<uint64_t>(1, one.BytesPerBlock());
    blocks =
        static_cast<int32_t>(std::max<int64_t>(per_seq, std::min(per_seq * cfg.max_num_seqs, cap)));
  }
  SHOAL_ASSIGN_OR_RETURN(
      KvStore kv, KvStore::Create(model->MakeKvLayout(blocks, cfg.block_size, cfg.kv_dtype)));
  auto exec = std::make_unique<LocalExecutor>(model, std::move(kv), cfg.n_threads);
  return std::make_unique<Engine>(std::move(exec), cfg, blocks, std::move(eog_ids));
}

Engine::Engine(std::unique_ptr<Executor> exec, const EngineConfig& cfg, int32_t kv_blocks,
               std::vector<int32_t> eog_ids)
    : cfg_(cfg),
      exec_(std::move(exec)),
      alloc_(kv_blocks),
      sched_(SchedConfig{cfg.block_size, cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.n_ctx},
             &alloc_),
      eog_(std::move(eog_ids)) {}

Result<int64_t> Engine::Add(Request req) {
  SHOAL_RETURN_IF_ERROR(req.sampling.Validate());
  if (req.n != 1) return Errorf("n > 1 is not supported yet");
  const int64_t id = next_id_++;
  for (int32_t t : req.prompt)
    if (t < 0 || t >= exec_->n_vocab()) return Errorf("prompt token {} out of range", t);
  SHOAL_RETURN_IF_ERROR(sched_.Add(id, static_cast<int32_t>(req.prompt.size())));
  Live l;
  l.n_prompt = static_cast<int32_t>(req.prompt.size());
  l.tokens = std::move(req.prompt);
  l.sampler = std::make_unique<Sampler>(req.sampling, static_cast<int32_t>(exec_->n_vocab()));
  l.params = std::move(req.sampling);
  l.logprobs = req.logprobs;
  stats_.prompt_tokens_total += l.n_prompt;
  seqs_.emplace(id, std::move(l));
  return id;
}

void Engine::Release(int64_t id) {
  sched_.Finish(id);
  seqs_.erase(id);
}

void Engine::Cancel(int64_t id) { Release(id); }

Result<std::vector<TokenEvent>> Engine::Step() {
  std::vector<TokenEvent> events;
  const StepPlan plan = sched_.Schedule();
  if (plan.chunks.empty()) return events;
  batch_.Clear();
  for (const ScheduledChunk& c : plan.chunks) {
    const Live& l = seqs_.at(c.seq_id);
    const std::span<const int32_t> ids(l.tokens.data() + c.start, static_cast<size_t>(c.n));
    batch_.Add(c.seq_id, ids, c.start, sched_.Table(c.seq_id).blocks, c.samples, false,
               TiledUntil(l.n_prompt));
  }
  SHOAL_RETURN_IF_ERROR(exec_->Run(batch_, &logits_));
  const int64_t V = exec_->n_vocab();
  size_t out_i = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    if (!c.samples) continue;
    Live& l = seqs_.at(c.seq_id);
    const float* lg = logits_.data() + static_cast<int64_t>(out_i++) * V;
    TokenEvent ev;
    ev.id = c.seq_id;
    ev.token = l.sampler->Sample(lg, l.tokens);
    if (cfg_.return_logits) ev.logits.assign(lg, lg + V);
    if (l.logprobs >= 0) {
      float mx = lg[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, lg[v]);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(lg[v] - mx));
      const float lse = mx + static_cast<float>(std::log(sum));
      ev.logprob = lg[ev.token] - lse;
      std::vector<int32_t> idx(static_cast<size_t>(V));
      for (int64_t v = 0; v < V; ++v) idx[static_cast<size_t>(v)] = static_cast<int32_t>(v);
      const size_t k = std::min<size_t>(static_cast<size_t>(l.logprobs), idx.size());
      std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(k), idx.end(),
                        [&](int32_t a, int32_t b) { return lg[a] > lg[b] || (lg[a] == lg[b] && a < b); });
      for (size_t i = 0; i < k; ++i) ev.top_logprobs.emplace_back(idx[i], lg[idx[i]] - lse);
    }
    ++stats_.generation_tokens_total;
    l.tokens.push_back(ev.token);
    const int32_t n_gen = static_cast<int32_t>(l.tokens.size()) - l.n_prompt;
    const bool eog = std::find(eog_.begin(), eog_.end(), ev.token) != eog_.end();
    if (eog && !l.params.ignore_eos) {
      ev.finish = FinishReason::kEos;
    } else if ((l.params.max_tokens >= 0 && n_gen >= l.params.max_tokens) ||
               static_cast<int32_t>(l.tokens.size()) >= cfg_.n_ctx) {
      ev.finish = FinishReason::kLength;
    }
    if (ev.finish != FinishReason::kNone) {
      Release(c.seq_id);
    } else {
      sched_.AppendToken(c.seq_id);
    }
    events.push_back(std::move(ev));
  }
  stats_.n_running = static_cast<int32_t>(seqs_.size());
  stats_.kv_usage = 1.0 - static_cast<double>(alloc_.n_free()) / alloc_.n_blocks();
  return events;
}

}  // namespace shoal
