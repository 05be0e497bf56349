// Model::Load (the architecture's layers behind the shared ends) and the one forward frame.
#include "model/model.h"

#include <algorithm>

#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/arch/arch.h"
#include "model/weights.h"

namespace shoal {

namespace {
void Grow(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}
}  // namespace

Result<std::unique_ptr<Model>> Model::Load(const gguf::File& file, const LoadOptions& opt) {
  SHOAL_ASSIGN_OR_RETURN(HParams hp, LoadHParams(file));
  std::unique_ptr<Model> m = FindArch(hp.arch)->new_model();  // LoadHParams found it
  SHOAL_RETURN_IF_ERROR(m->SetLayerRange(hp, opt));
  if (opt.tp.size < 1 || opt.tp.rank < 0 || opt.tp.rank >= opt.tp.size)
    return Errorf("tensor-parallel member {} of {} is invalid", opt.tp.rank, opt.tp.size);
  if (opt.tp.size > 1 && !m->SupportsTensorParallel())
    return Errorf("{}: architecture {} cannot be split inside a layer (tensor parallel) yet",
                  file.path(), hp.arch);
  if (opt.tp.size > 1 && opt.tp.fast && !m->SupportsFastTensorParallel())
    return Errorf("{}: architecture {} splits only in exact mode (--tp-mode exact)", file.path(),
                  hp.arch);
  m->tp_ = opt.tp;
  m->embd_rows_ = SliceOf(hp.n_embd, opt.tp.size, opt.tp.rank);
  m->embd_gather_.SetCols(SliceWidths(hp.n_embd, opt.tp.size), opt.tp.rank);
  SHOAL_RETURN_IF_ERROR(m->LoadEndWeights(file));
  SHOAL_RETURN_IF_ERROR(m->LoadLayers(file, opt));
  return m;
}

Status Model::SetLayerRange(const HParams& hp, const LoadOptions& opt) {
  hp_ = hp;
  first_ = opt.first_layer;
  last_ = opt.last_layer < 0 ? static_cast<int32_t>(hp.n_layer) : opt.last_layer;
  if (first_ < 0 || first_ >= last_ || last_ > hp.n_layer)
    return Errorf("layer range [{}, {}) is invalid for {} layers", first_, last_, hp.n_layer);
  return Status::Ok();
}

Status Model::LoadEndWeights(const gguf::File& f) {
  const int64_t E = hp_.n_embd;
  if (is_first_stage() || (is_last_stage() && hp_.tied_embeddings)) {
    SHOAL_ASSIGN_OR_RETURN(tok_embd_, LoadMatrix(f, "token_embd.weight", E, hp_.n_vocab));
  }
  if (is_last_stage()) {
    SHOAL_ASSIGN_OR_RETURN(output_norm_, LoadVector(f, "output_norm.weight", E));
    if (hp_.tied_embeddings) {
      output_ = tok_embd_;
    } else {
      SHOAL_ASSIGN_OR_RETURN(output_, LoadMatrix(f, "output.weight", E, hp_.n_vocab));
    }
    // A member computes the logits of its vocabulary slice; the gather joins them.
    output_ = RowSlice(output_, SliceOf(hp_.n_vocab, tp_.size, tp_.rank));
    head_gather_.SetCols(SliceWidths(hp_.n_vocab, tp_.size), tp_.rank);
  }
  return Status::Ok();
}

KvLayout Model::MakeKvLayout(int32_t n_blocks, int32_t block_size, DType dtype,
                             int32_t n_state_slots) const {
  KvLayout l;
  l.n_layers = last_ - first_;
  l.k_dim = CacheKDim();
  l.v_dim = CacheVDim();
  l.dtype = dtype;
  l.block_size = block_size;
  l.n_blocks = n_blocks;
  l.state_floats = StateFloatsPerSeq();
  l.n_state_slots = l.state_floats > 0 ? n_state_slots : 0;
  return l;
}

Status Model::Forward(const Batch& b, const float* hidden_in, KvStore& kv, ThreadPool* pool,
                      ForwardOutput* out) {
  const int64_t n = b.n_rows();
  if (n == 0) return Status::Ok();
  if (split() && !comm_.inner()) return Errorf("a tensor-parallel member runs without its group");
  SHOAL_RETURN_IF_ERROR(BindChunks(b, kv));
  SHOAL_RETURN_IF_ERROR(ReadInput(b, hidden_in));
  step_status_ = Status::Ok();
  BeginStep(b);
  for (int32_t li = 0; li < last_ - first_; ++li) {
    RunLayer(li, b, kv, pool, x_.data());
    if (!step_status_.ok()) return step_status_.Annotate("layer " + std::to_string(first_ + li));
  }
  if (StateFloatsPerSeq() > 0)
    for (const SeqChunk& c : b.chunks) kv.StatePos(c.state_slot) = c.pos0 + c.n_tokens;
  return EmitOutput(b, pool, out);
}

Status Model::BindChunks(const Batch& b, KvStore& kv) {
  for (const SeqChunk& c : b.chunks) {
    const int64_t need = static_cast<int64_t>(c.pos0) + c.n_tokens;
    if (static_cast<int64_t>(c.blocks.size()) * kv.layout().block_size < need)
      return Errorf("sequence {}: block table holds {} blocks, {} positions needed", c.seq_id,
                    c.blocks.size(), need);
  }
  // Recurrent state per chunk, in its KvStore slot: a sequence starting at 0 gets a fresh one;
  // any other chunk must continue where its state ends (the slot remembers the position).
  states_.assign(b.chunks.size(), nullptr);
  const int64_t floats = StateFloatsPerSeq();
  if (floats == 0) return Status::Ok();
  for (size_t ci = 0; ci < b.chunks.size(); ++ci) {
    const SeqChunk& c = b.chunks[ci];
    if (c.state_slot < 0 || c.state_slot >= kv.layout().n_state_slots ||
        kv.layout().state_floats != floats)
      return Errorf(
          "{}: sequence {} has no recurrent-state slot (slot {} of {}; the executor must "
          "allot KvLayout::n_state_slots and the scheduler SchedConfig::state_slots)",
          hp_.arch, c.seq_id, c.state_slot, kv.layout().n_state_slots);
    float* base = kv.State(c.state_slot);
    if (c.pos0 == 0) {
      std::fill(base, base + floats, 0.f);
    } else if (kv.StatePos(c.state_slot) != c.pos0) {
      return Errorf(
          "{}: sequence {} resumes at position {} but its recurrent state is at {} (a "
          "prefix-cache hit without its state snapshot copied, or a swap-in: it is not swapped)",
          hp_.arch, c.seq_id, c.pos0, kv.StatePos(c.state_slot));
    }
    states_[ci] = base;
  }
  return Status::Ok();
}

Status Model::ReadInput(const Batch& b, const float* hidden_in) {
  const int64_t n = b.n_rows(), E = hp_.n_embd;
  Grow(x_, kernels::ScratchRows(n) * E);
  float* x = x_.data();
  n_carried_ = 0;
  if (!is_first_stage()) {
    // hidden_in: [HiddenPlanes(first)][n][E]: x, then the planes carried from earlier stages.
    if (!hidden_in) return Errorf("a later pipeline stage needs hidden states as input");
    std::copy(hidden_in, hidden_in + n * E, x);
    for (int j = 1; j < HiddenPlanes(first_); ++j) Carry(hidden_in + j * n * E, n);
    return Status::Ok();
  }
  if (static_cast<int64_t>(b.tokens.size()) != n)
    return Errorf("{} token ids for a batch of {} rows", b.tokens.size(), n);
  for (int64_t r = 0; r < n; ++r) {
    const int32_t id = b.tokens[static_cast<size_t>(r)];
    if (id < 0 || id >= hp_.n_vocab)
      return Errorf("token id {} out of range [0, {})", id, hp_.n_vocab);
    kernels::Dequantize(tok_embd_.type,
                        tok_embd_.data + static_cast<uint64_t>(id) * tok_embd_.row_bytes, x + r * E,
                        E);
  }
  return Status::Ok();
}

void Model::Carry(const float* x, int64_t n) {
  const int64_t E = hp_.n_embd;
  if (static_cast<int>(carried_.size()) <= n_carried_) carried_.emplace_back();
  std::vector<float>& plane = carried_[static_cast<size_t>(n_carried_++)];
  Grow(plane, n * E);
  std::copy(x, x + n * E, plane.data());
}

Status Model::EmitOutput(const Batch& b, ThreadPool* pool, ForwardOutput* out) {
  const int64_t n = b.n_rows(), E = hp_.n_embd;
  const float* x = x_.data();
  if (!is_last_stage()) {
    // [HiddenPlanes(last)][n][E]: x, then every carried plane (the next stage's layers read them).
    if (n_carried_ + 1 != HiddenPlanes(last_))
      return Errorf("{}: {} hidden planes at layer {}, {} expected", hp_.arch, n_carried_ + 1,
                    last_, HiddenPlanes(last_));
    out->hidden.resize(static_cast<size_t>((n_carried_ + 1) * n * E));
    std::copy(x, x + n * E, out->hidden.begin());
    for (int j = 0; j < n_carried_; ++j)
      std::copy(carried(j), carried(j) + n * E, out->hidden.begin() + (j + 1) * n * E);
    return Status::Ok();
  }
  const float* h = HeadInput(x, n);
  const int64_t n_out = static_cast<int64_t>(b.out_rows.size());
  Grow(head_rows_, n_out * E);
  for (int64_t i = 0; i < n_out; ++i) {
    const int32_t r = b.out_rows[static_cast<size_t>(i)];
    if (r < 0 || r >= n) return Errorf("output row {} outside the batch of {} rows", r, n);
    kernels::RmsNorm(h + r * E, output_norm_.data(), head_rows_.data() + i * E, E, hp_.rms_eps);
  }
  out->logits.resize(static_cast<size_t>(n_out * hp_.n_vocab));
  MatMulGather(output_, head_rows_.data(), n_out, head_gather_, out->logits.data(), pool,
               &head_mm_);
  return step_status_;
}

void Model::Gather(ColumnGather& g, const float* mine, int64_t n, float* out) {
  if (step_status_.ok()) {
    Status s = g.Run(comm_, mine, n, out);
    if (s.ok()) return;
    FailStep(std::move(s));
  }
  std::fill(out, out + n * g.total(), 0.f);
}

void Model::MatMulGather(const kernels::MatrixView& w, const float* x, int64_t n, ColumnGather& g,
                         float* out, ThreadPool* pool, kernels::MatMulScratch* mm) {
  if (!split()) {
    kernels::MatMul(w, x, w.cols, n, out, w.rows, pool, mm);
    return;
  }
  Grow(gather_local_, n * w.rows);
  kernels::MatMul(w, x, w.cols, n, gather_local_.data(), w.rows, pool, mm);
  Gather(g, gather_local_.data(), n, out);
}

DenseFfn Model::SliceFfn(const DenseFfn& f, Slice ff) const {
  return {RowSlice(f.gate, ff), RowSlice(f.up, ff), RowSlice(f.down, embd_rows_)};
}

void Model::SplitFfn(const DenseFfn& f, const GluParams& act, ColumnGather& g, const float* xn,
                     int64_t n, float* out, ThreadPool* pool, FfnScratch* s) {
  const int64_t nf = f.gate.rows, E = hp_.n_embd;
  Grow(s->g, n * nf);
  Grow(s->u, n * nf);
  kernels::MatMul(f.gate, xn, E, n, s->g.data(), nf, pool, &s->mm);
  kernels::MatMul(f.up, xn, E, n, s->u.data(), nf, pool, &s->mm);
  ApplyGlu(act, s->g.data(), s->u.data(), s->g.data(), n * nf);
  Grow(ffn_all_, n * g.total());
  Gather(g, s->g.data(), n, ffn_all_.data());
  MatMulGather(f.down, ffn_all_.data(), n, embd_gather_, out, pool, &s->mm);
}

void Model::FailStep(Status s) {
  if (step_status_.ok()) step_status_ = std::move(s);
}

}  // namespace shoal
