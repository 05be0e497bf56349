// The llama-family layer: x += attention(rmsnorm(x)); x += SwiGLU FFN or MoE (rmsnorm(x)).
// Per-architecture options come from hparams: q/k/v biases (qwen2), per-head q/k RMSNorm
// (qwen3), RoPE pairing (norm or neox), experts in the layers is_moe_layer names.
// A tensor-parallel member (model/tensor_parallel.h) holds a slice of the query heads (and the
// KV heads they read), of the output and down projections' rows (embedding columns), of the
// gate/up rows (FFN columns) and of the experts; it gathers attention outputs, projections and
// FFN activations so that every element is one whole dot product, as in a single process.
#include "model/arch/llama/llama_family.h"

#include <fmt/format.h>

#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/weights.h"

namespace shoal {
namespace {

using kernels::MatrixView;

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [n_embd]
  MatrixView wq, wk, wv, wo;               // [q_dim|k_dim|v_dim, n_embd], [n_embd, q_dim]
  std::vector<float> bq, bk, bv, bo;       // optional biases
  std::vector<float> q_norm, k_norm;       // [head_dim_k] (qwen3)
  MatrixView gate, up, down;               // [n_ff, n_embd] x2, [n_embd, n_ff] (dense layers)
  bool moe = false;
  MoeWeights experts;  // MoE layers (Mixtral-style llama, qwen3moe)
  // Fast tensor parallel: this member's input columns of wo and down, copied (TpShard::fast).
  std::vector<uint8_t> wo_cols, down_cols;
};

// Scratch activations, grown to the largest batch seen (no allocation in steady state).
struct Workspace {
  std::vector<float> xn, q, k, v, att, tmp, gate, up;
  std::vector<float> att_all, part, ffh;  // tensor parallel: gathered att, a slice's output, FFN
  std::vector<float> sum;                 // fast mode: the members' partial sums
  std::vector<float> attn_scratch;        // per thread: max(n_kv, dv) floats
  std::vector<float> rope;                // [n_rows, n_rot] (cos, sin) pairs
  kernels::MatMulScratch mm;
  MoeScratch moe;
};

void Grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

class LlamaFamily final : public Model {
 private:
  Status LoadLayers(const gguf::File& f, const LoadOptions& opt) override;
  void BeginStep(const Batch& b) override;
  void RunLayer(int32_t li, const Batch& b, KvStore& kv, ThreadPool* pool, float* x) override;
  void Attention(const LayerWeights& L, int32_t local_layer, const Batch& b, KvStore& kv,
                 ThreadPool* pool);
  void MatMul(const MatrixView& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
    kernels::MatMul(w, x, w.cols, n, y, w.rows, pool, &ws_.mm);
  }

  bool SupportsTensorParallel() const override { return true; }
  bool SupportsFastTensorParallel() const override { return true; }
  int64_t CacheKDim() const override { return kvh_.count * hp_.head_dim_k; }
  int64_t CacheVDim() const override { return kvh_.count * hp_.head_dim_v; }
  // Sets this member's slices (the whole model when not split).
  void SetShard();
  // y [n, E] = the output or down projection w of x [n, w.cols]: this member's rows of it,
  // gathered; or in fast mode its columns, the partial sums added over the members.
  void ProjectEmbd(const MatrixView& w, const float* x, int64_t n, float* y, ThreadPool* pool);
  // Fast mode: wo and down cut to this member's input columns.
  Status CutColumns(LayerWeights& L);

  kernels::RopeParams rope_;
  MoeConfig moe_;
  // This member's query heads, the KV heads they read, embedding columns and FFN columns.
  Slice qh_, kvh_, ff_;
  ColumnGather att_g_, ff_g_;
  float kq_scale_ = 1.f;
  std::vector<LayerWeights> layers_;
  Workspace ws_;
};

void LlamaFamily::SetShard() {
  const HParams& hp = hp_;
  const int T = tp_.size, r = tp_.rank;
  const int64_t group = hp.n_head / hp.n_head_kv;
  qh_ = SliceOf(hp.n_head, T, r);
  kvh_ = qh_.count == 0 ? Slice{0, 0}
                        : Slice{qh_.first / group, (qh_.end() - 1) / group + 1 - qh_.first / group};
  // Fast mode cuts down's columns by the FFN slice: whole quant blocks (256 covers every type),
  // 512 where it can, so each member's down can be pretiled (kernels::CanPretile: 16-block groups
  // of Q4_0): unpretiled, 1b Q4_0's tp=2 decode took 36.8 ms/token in fast mode against 34.6 exact.
  int64_t unit = 1;
  for (const int64_t u : {512, 256, 32})
    if (tp_.fast && unit == 1 && hp.n_ff % u == 0) unit = u;
  ff_ = UnitSliceOf(hp.n_ff, T, r, unit);
  att_g_.SetCols(SliceWidths(hp.n_head, T, hp.head_dim_v), r);
  ff_g_.SetCols(SliceWidths(hp.n_ff, T), r);
}

Status LlamaFamily::LoadLayers(const gguf::File& f, const LoadOptions& opt) {
  const HParams& hp = hp_;
  const int64_t E = hp.n_embd;
  SetShard();
  const int64_t hdk = hp.head_dim_k, hdv = hp.head_dim_v;
  const Slice q_rows{qh_.first * hdk, qh_.count * hdk}, k_rows{kvh_.first * hdk, kvh_.count * hdk},
      v_rows{kvh_.first * hdv, kvh_.count * hdv};
  auto cut = [](std::vector<float>& v, Slice s) {
    if (!v.empty()) v = std::vector<float>(v.begin() + s.first, v.begin() + s.end());
  };
  for (int il = first_; il < last_; ++il) {
    auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
    LayerWeights L;
    SHOAL_ASSIGN_OR_RETURN(L.attn_norm, LoadVector(f, n("attn_norm.weight"), E));
    SHOAL_ASSIGN_OR_RETURN(L.wq, LoadMatrix(f, n("attn_q.weight"), E, hp.q_dim()));
    SHOAL_ASSIGN_OR_RETURN(L.wk, LoadMatrix(f, n("attn_k.weight"), E, hp.k_dim()));
    SHOAL_ASSIGN_OR_RETURN(L.wv, LoadMatrix(f, n("attn_v.weight"), E, hp.v_dim()));
    SHOAL_ASSIGN_OR_RETURN(L.wo,
                           LoadMatrix(f, n("attn_output.weight"), hp.n_head * hp.head_dim_v, E));
    SHOAL_ASSIGN_OR_RETURN(L.bq, LoadOptionalVector(f, n("attn_q.bias"), hp.q_dim()));
    SHOAL_ASSIGN_OR_RETURN(L.bk, LoadOptionalVector(f, n("attn_k.bias"), hp.k_dim()));
    SHOAL_ASSIGN_OR_RETURN(L.bv, LoadOptionalVector(f, n("attn_v.bias"), hp.v_dim()));
    SHOAL_ASSIGN_OR_RETURN(L.bo, LoadOptionalVector(f, n("attn_output.bias"), E));
    if (hp.qkv_bias && (L.bq.empty() || L.bk.empty() || L.bv.empty()))
      return Errorf("{}: layer {} lacks the q/k/v biases that {} requires", f.path(), il, hp.arch);
    // This member's rows (all of them when not split).
    L.wq = RowSlice(L.wq, q_rows);
    L.wk = RowSlice(L.wk, k_rows);
    L.wv = RowSlice(L.wv, v_rows);
    if (!tp_.fast) L.wo = RowSlice(L.wo, embd_rows_);
    cut(L.bq, q_rows);
    cut(L.bk, k_rows);
    cut(L.bv, v_rows);
    if (hp.qk_norm) {
      SHOAL_ASSIGN_OR_RETURN(L.q_norm, LoadVector(f, n("attn_q_norm.weight"), hp.head_dim_k));
      SHOAL_ASSIGN_OR_RETURN(L.k_norm, LoadVector(f, n("attn_k_norm.weight"), hp.head_dim_k));
    }
    SHOAL_ASSIGN_OR_RETURN(L.ffn_norm, LoadVector(f, n("ffn_norm.weight"), E));
    if (hp.is_moe_layer(il)) {
      L.moe = true;
      SHOAL_ASSIGN_OR_RETURN(L.experts, LoadMoeWeights(f, il, E, E, hp.n_ff_exp, hp.n_expert));
    } else {
      SHOAL_ASSIGN_OR_RETURN(L.gate, LoadMatrix(f, n("ffn_gate.weight"), E, hp.n_ff));
      SHOAL_ASSIGN_OR_RETURN(L.up, LoadMatrix(f, n("ffn_up.weight"), E, hp.n_ff));
      SHOAL_ASSIGN_OR_RETURN(L.down, LoadMatrix(f, n("ffn_down.weight"), hp.n_ff, E));
      L.gate = RowSlice(L.gate, ff_);
      L.up = RowSlice(L.up, ff_);
      if (!tp_.fast) L.down = RowSlice(L.down, embd_rows_);
    }
    if (split() && tp_.fast)
      SHOAL_RETURN_IF_ERROR(CutColumns(L).Annotate(fmt::format("{}: layer {}", f.path(), il)));
    expert_load_.emplace_back(L.moe ? static_cast<size_t>(hp.n_expert) : 0, 0);
    layers_.push_back(std::move(L));
  }
  if (hp.head_dim_k > 1024 || hp.head_dim_v > 1024)
    return Errorf("head dim {} exceeds the supported 1024", hp.head_dim_k);
  if (opt.pretile) {
    // The tied head is the embedding table, whose rows the first stage reads: it stays as it is.
    std::vector<MatrixView*> ms = {hp.tied_embeddings ? nullptr : &output_};
    for (LayerWeights& L : layers_)
      for (MatrixView* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down})
        if (m->rows > 0) ms.push_back(m);
    SHOAL_RETURN_IF_ERROR(PretileMatrices(f, ms, &pretiled_));
    // Fast mode's column copies now live in the arena too: free the copies.
    for (LayerWeights& L : layers_)
      for (auto [m, cols] : {std::pair{&L.wo, &L.wo_cols}, std::pair{&L.down, &L.down_cols}})
        if (!cols->empty() && (m->data < cols->data() || m->data >= cols->data() + cols->size()))
          std::vector<uint8_t>().swap(*cols);
  }

  if (hp.n_expert > 0 && hp.n_expert_shared > 0)
    return Errorf("{}: shared experts are not supported for {}", f.path(), hp.arch);
  moe_ = MoeConfigFrom(hp);
  rope_.n_rot = static_cast<int>(hp.n_rot);
  rope_.freq_base = hp.rope_freq_base;
  rope_.freq_scale = hp.rope_freq_scale;
  rope_.mode =
      hp.rope_type == RopeType::kNeox ? kernels::RopeMode::kNeox : kernels::RopeMode::kNorm;
  rope_.n_ctx_orig = static_cast<int>(hp.rope_n_ctx_orig);
  if (hp.rope_yarn) rope_.ext_factor = 1.0f;
  kq_scale_ = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
  return Status::Ok();
}

void LlamaFamily::Attention(const LayerWeights& L, int32_t local_layer, const Batch& b, KvStore& kv,
                            ThreadPool* pool) {
  const HParams& hp = hp_;
  const int64_t n = b.n_rows();
  const int hdk = static_cast<int>(hp.head_dim_k), hdv = static_cast<int>(hp.head_dim_v);
  // This member's widths: its query heads, and the KV heads they read.
  const int64_t qd = qh_.count * hdk, kd = CacheKDim(), vd = CacheVDim();
  const KvLayout& lay = kv.layout();
  uint8_t* kb = kv.KBase(local_layer);
  uint8_t* vb = kv.VBase(local_layer);

  // Write this batch's K/V rows into the cache (rounded to the cache type).
  for (const SeqChunk& c : b.chunks) {
    for (int32_t i = 0; i < c.n_tokens; ++i) {
      const int32_t pos = c.pos0 + i;
      const int64_t blk = c.blocks[static_cast<size_t>(pos / lay.block_size)];
      const uint64_t slot = static_cast<uint64_t>(blk * lay.block_size + pos % lay.block_size);
      const int64_t row = c.row0 + i;
      StoreKvRow(lay.dtype, &ws_.k[static_cast<size_t>(row * kd)], kb + slot * kv.k_row_bytes(),
                 kd);
      StoreKvRow(lay.dtype, &ws_.v[static_cast<size_t>(row * vd)], vb + slot * kv.v_row_bytes(),
                 vd);
    }
  }

  // One task per (row, head): causal attention over the sequence's positions [0, pos].
  int32_t max_kv = 0;
  for (const SeqChunk& c : b.chunks) max_kv = std::max(max_kv, c.pos0 + c.n_tokens);
  const int64_t group = hp.n_head / hp.n_head_kv;
  const int64_t nq = qh_.count;  // heads h in [0, nq) are global heads qh_.first + h
  const size_t per_thread = kernels::AttendHeadsScratch(static_cast<int>(group), hdk, hdv, max_kv);
  const int n_threads = pool ? pool->size() : 1;
  Grow(ws_.attn_scratch, per_thread * static_cast<size_t>(n_threads));
  const bool tiled_ok = kernels::TiledNumericsApply(hdv);
  // Each row's heads are cut into n_threads contiguous ranges (threads sharing a KV head stay
  // few) and the ranges rotate over the threads row by row: a causal prompt's row costs grow
  // with the position, so contiguous halves of all tasks gave the second of 2 threads 3x the
  // first's work at pp512. A single row (decode) keeps the plain split.
  auto work = [&](int t, int nt) {
    float* scratch = ws_.attn_scratch.data() + per_thread * static_cast<size_t>(t);
    size_t ci = 0;
    for (int64_t row = 0; row < n; ++row) {
      const int64_t part = (t + row) % nt;
      const int64_t h0 = qh_.first + nq * part / nt, h1 = qh_.first + nq * (part + 1) / nt;
      // Heads of one KV head run together (AttendHeads converts each key tile once for them).
      for (int64_t h = h0, h_end; h < h1; h = h_end) {
        h_end = std::min(h1, (h / group + 1) * group);
        const int64_t lh = h - qh_.first, lkv = h / group - kvh_.first;  // local head indices
        while (b.chunks[ci].row0 + b.chunks[ci].n_tokens <= row) ++ci;
        const SeqChunk& c = b.chunks[ci];
        kernels::PagedKv pk;
        pk.k_base = kb;
        pk.v_base = vb;
        pk.k_row_stride = kv.k_row_bytes();
        pk.v_row_stride = kv.v_row_bytes();
        pk.k_head_offset = lkv * hdk;
        pk.v_head_offset = lkv * hdv;
        pk.dtype = lay.dtype;
        pk.block_size = lay.block_size;
        pk.blocks = c.blocks;
        const int32_t pos = c.pos0 + static_cast<int32_t>(row - c.row0);
        kernels::AttendHeads(&ws_.q[static_cast<size_t>(row * qd + lh * hdk)], hdk,
                             static_cast<int>(h_end - h), hdk, hdv, kq_scale_, pk, pos + 1,
                             &ws_.att[static_cast<size_t>(row * nq * hdv + lh * hdv)], hdv, scratch,
                             tiled_ok && pos < c.tiled_until);
      }
    }
  };
  // Tiny attention (under ~2^17 multiply-adds: short contexts of small models) runs inline;
  // see kernels::MatMul for why waking the pool costs more than it saves there.
  int64_t macs = 0;
  for (const SeqChunk& c : b.chunks)
    macs += int64_t{c.n_tokens} * (c.pos0 + c.n_tokens) * nq * (hdk + hdv);
  if (pool && macs >= (int64_t{1} << 17)) {
    pool->Run(work);
  } else {
    work(0, 1);
  }
}

void LlamaFamily::BeginStep(const Batch& b) {
  const HParams& hp = hp_;
  const int64_t nr = kernels::ScratchRows(b.n_rows());  // rows the buffers hold room for
  const int64_t E = hp.n_embd;
  Grow(ws_.xn, nr * E);
  Grow(ws_.q, nr * qh_.count * hp.head_dim_k);
  Grow(ws_.k, nr * CacheKDim());
  Grow(ws_.v, nr * CacheVDim());
  Grow(ws_.att, nr * qh_.count * hp.head_dim_v);
  Grow(ws_.tmp, nr * E);
  Grow(ws_.gate, nr * ff_.count);
  Grow(ws_.up, nr * ff_.count);
  if (split()) {
    Grow(ws_.att_all, nr * hp.n_head * hp.head_dim_v);
    if (tp_.fast) Grow(ws_.part, nr * E);
    Grow(ws_.ffh, nr * hp.n_ff);
  }
  Grow(ws_.rope, nr * hp.n_rot);
  // RoPE tables per row (position-dependent only).
  for (const SeqChunk& c : b.chunks)
    for (int32_t i = 0; i < c.n_tokens; ++i)
      kernels::RopeCache(rope_, c.pos0 + i,
                         &ws_.rope[static_cast<size_t>((c.row0 + i) * hp.n_rot)]);
}

Status LlamaFamily::CutColumns(LayerWeights& L) {
  const int64_t hdv = hp_.head_dim_v;
  SHOAL_ASSIGN_OR_RETURN(L.wo, ColumnSlice(L.wo, {qh_.first * hdv, qh_.count * hdv}, &L.wo_cols));
  if (!L.moe) {
    SHOAL_ASSIGN_OR_RETURN(L.down, ColumnSlice(L.down, ff_, &L.down_cols));
  }
  return Status::Ok();
}

void LlamaFamily::ProjectEmbd(const MatrixView& w, const float* x, int64_t n, float* y,
                              ThreadPool* pool) {
  if (split() && tp_.fast) {
    // [n, this member's input columns] -> partial [n, E], summed over the members in order.
    if (w.cols > 0) {
      MatMul(w, x, n, ws_.part.data(), pool);
    } else {
      std::fill(ws_.part.begin(), ws_.part.begin() + n * hp_.n_embd, 0.f);
    }
    if (Status s = AllReduceSum(*comm(), tp_.size, ws_.part.data(), n * hp_.n_embd, y, &ws_.sum);
        !s.ok()) {
      FailStep(std::move(s));
      std::fill(y, y + n * hp_.n_embd, 0.f);
    }
    return;
  }
  // [n, w.cols] -> this member's embedding columns -> gathered [n, E]
  MatMulGather(w, x, n, embd_gather_, y, pool, &ws_.mm);
}

void LlamaFamily::RunLayer(int32_t li, const Batch& b, KvStore& kv, ThreadPool* pool, float* x) {
  const HParams& hp = hp_;
  const int64_t n = b.n_rows();
  const int64_t E = hp.n_embd, kd = CacheKDim(), vd = CacheVDim();
  const int hdk = static_cast<int>(hp.head_dim_k);
  const int64_t nq = qh_.count, nkv = kvh_.count, qd = nq * hdk;
  const LayerWeights& L = layers_[static_cast<size_t>(li)];
  float* xn = ws_.xn.data();
  for (int64_t r = 0; r < n; ++r)
    kernels::RmsNorm(x + r * E, L.attn_norm.data(), xn + r * E, E, hp.rms_eps);
  MatMul(L.wq, xn, n, ws_.q.data(), pool);
  MatMul(L.wk, xn, n, ws_.k.data(), pool);
  MatMul(L.wv, xn, n, ws_.v.data(), pool);
  for (int64_t r = 0; r < n; ++r) {
    float* q = ws_.q.data() + r * qd;
    float* k = ws_.k.data() + r * kd;
    if (!L.bq.empty()) kernels::AddInPlace(q, L.bq.data(), qd);
    if (!L.bk.empty()) kernels::AddInPlace(k, L.bk.data(), kd);
    if (!L.bv.empty()) kernels::AddInPlace(ws_.v.data() + r * vd, L.bv.data(), vd);
    if (!L.q_norm.empty()) {
      for (int64_t h = 0; h < nq; ++h)
        kernels::RmsNorm(q + h * hdk, L.q_norm.data(), q + h * hdk, hdk, hp.rms_eps);
      for (int64_t h = 0; h < nkv; ++h)
        kernels::RmsNorm(k + h * hdk, L.k_norm.data(), k + h * hdk, hdk, hp.rms_eps);
    }
    if (hp.rope_type != RopeType::kNone) {
      const float* rc = &ws_.rope[static_cast<size_t>(r * hp.n_rot)];
      kernels::ApplyRope(rope_, rc, q, static_cast<int>(nq), hdk);
      kernels::ApplyRope(rope_, rc, k, static_cast<int>(nkv), hdk);
    }
  }
  Attention(L, li, b, kv, pool);
  // [n, n_head * head_dim_v] (gathered from the members' heads) -> [n, E]
  const float* att = ws_.att.data();
  if (split() && !tp_.fast) {
    Gather(att_g_, att, n, ws_.att_all.data());
    att = ws_.att_all.data();
  }
  ProjectEmbd(L.wo, att, n, ws_.tmp.data(), pool);
  for (int64_t r = 0; r < n; ++r) {
    if (!L.bo.empty()) kernels::AddInPlace(ws_.tmp.data() + r * E, L.bo.data(), E);
    kernels::AddInPlace(x + r * E, ws_.tmp.data() + r * E, E);
    kernels::RmsNorm(x + r * E, L.ffn_norm.data(), xn + r * E, E, hp.rms_eps);
  }
  if (L.moe) {
    // [n, n_embd] -> routed experts (this member's, gathered) -> [n, n_embd]
    Status moe_status;
    const MoeShard shard{comm(), tp_.rank, tp_.size, &moe_status};
    RunMoe(moe_, L.experts, xn, E, xn, E, n, ws_.tmp.data(), pool, &ws_.moe,
           split() ? &shard : nullptr, expert_load_[static_cast<size_t>(li)].data());
    if (!moe_status.ok()) FailStep(std::move(moe_status));
  } else {
    const int64_t nf = ff_.count;
    MatMul(L.gate, xn, n, ws_.gate.data(), pool);
    MatMul(L.up, xn, n, ws_.up.data(), pool);
    kernels::SwiGlu(ws_.gate.data(), ws_.up.data(), ws_.gate.data(), n * nf);
    const float* h = ws_.gate.data();
    if (split() && !tp_.fast) {
      Gather(ff_g_, h, n, ws_.ffh.data());  // [n, n_ff]
      h = ws_.ffh.data();
    }
    ProjectEmbd(L.down, h, n, ws_.tmp.data(), pool);
  }
  kernels::AddInPlace(x, ws_.tmp.data(), n * E);
}

}  // namespace

std::unique_ptr<Model> NewLlamaFamily() { return std::make_unique<LlamaFamily>(); }

}  // namespace shoal
