// Absorbed MLA: q_abs = k_b q_nope per head, attention over [c | k_pe] rows, v_b expansion.
#include "model/mla_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/weights.h"

namespace shoal {

namespace {
template <typename T>
void Grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}
inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
}  // namespace

Result<MlaWeights> LoadMlaWeights(const gguf::File& f, const HParams& hp, int il) {
  auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
  const int64_t E = hp.n_embd, H = hp.n_head, hk = hp.head_dim_k_mla, R = hp.kv_lora_rank;
  const int64_t nope = hk - hp.n_rot, vm = hp.head_dim_v_mla;
  MlaWeights w;
  if (hp.q_lora_rank > 0) {
    SHOAL_ASSIGN_OR_RETURN(w.wq_a, LoadMatrix(f, n("attn_q_a.weight"), E, hp.q_lora_rank));
    SHOAL_ASSIGN_OR_RETURN(w.q_a_norm, LoadVector(f, n("attn_q_a_norm.weight"), hp.q_lora_rank));
    SHOAL_ASSIGN_OR_RETURN(w.wq_b, LoadMatrix(f, n("attn_q_b.weight"), hp.q_lora_rank, H * hk));
  } else {
    SHOAL_ASSIGN_OR_RETURN(w.wq, LoadMatrix(f, n("attn_q.weight"), E, H * hk));
  }
  SHOAL_ASSIGN_OR_RETURN(w.wkv_a, LoadMatrix(f, n("attn_kv_a_mqa.weight"), E, R + hp.n_rot));
  SHOAL_ASSIGN_OR_RETURN(w.kv_a_norm, LoadVector(f, n("attn_kv_a_norm.weight"), R));
  for (int64_t h = 0; h < H; ++h) {
    // attn_k_b ne [nope, R, H]: head h maps q_nope (nope) to the latent (R).
    SHOAL_ASSIGN_OR_RETURN(auto kb, LoadMatrixSlice(f, n("attn_k_b.weight"), nope, R, H, h));
    // attn_v_b ne [R, v_mla, H]: head h maps the latent output (R) to v_mla.
    SHOAL_ASSIGN_OR_RETURN(auto vb, LoadMatrixSlice(f, n("attn_v_b.weight"), R, vm, H, h));
    w.wk_b.push_back(kb);
    w.wv_b.push_back(vb);
  }
  SHOAL_ASSIGN_OR_RETURN(w.wo, LoadMatrix(f, n("attn_output.weight"), H * vm, E));
  if (f.FindTensor(n("attn_gate.weight"))) {
    SHOAL_ASSIGN_OR_RETURN(w.gate, LoadMatrix(f, n("attn_gate.weight"), E, H * vm));
  }
  return w;
}

MlaWeights SliceMlaHeads(const MlaWeights& w, const HParams& hp, Slice heads, Slice emb) {
  const int64_t hk = hp.head_dim_k_mla, vm = hp.head_dim_v_mla;
  MlaWeights m = w;
  const Slice q_rows{heads.first * hk, heads.count * hk},
      v_rows{heads.first * vm, heads.count * vm};
  if (m.wq_b.data) m.wq_b = RowSlice(m.wq_b, q_rows);
  if (m.wq.data) m.wq = RowSlice(m.wq, q_rows);
  m.wk_b.assign(w.wk_b.begin() + heads.first, w.wk_b.begin() + heads.end());
  m.wv_b.assign(w.wv_b.begin() + heads.first, w.wv_b.begin() + heads.end());
  if (m.gate.data) m.gate = RowSlice(m.gate, v_rows);
  m.wo = RowSlice(m.wo, emb);
  return m;
}

void RunMla(const HParams& hp, const MlaWeights& w, const MlaOptions& opt, const float* xn,
            const float* rope, const Batch& b, KvStore& kv, int32_t local_layer, float* out,
            ThreadPool* pool, MlaScratch* s) {
  const float* o = RunMlaHeads(hp, w, opt, xn, rope, b, kv, local_layer, pool, s);
  const int64_t H = static_cast<int64_t>(w.wv_b.size()), vm = hp.head_dim_v_mla;
  kernels::MatMul(w.wo, o, H * vm, b.n_rows(), out, hp.n_embd, pool, &s->mm);
}

const float* RunMlaHeads(const HParams& hp, const MlaWeights& w, const MlaOptions& opt,
                         const float* xn, const float* rope, const Batch& b, KvStore& kv,
                         int32_t local_layer, ThreadPool* pool, MlaScratch* s) {
  // H: the heads w holds (a tensor-parallel member's slice, or all of them).
  const int64_t n = b.n_rows(), E = hp.n_embd, H = static_cast<int64_t>(w.wk_b.size());
  const int64_t hk = hp.head_dim_k_mla, R = hp.kv_lora_rank, nr = hp.n_rot, nope = hk - nr;
  const int64_t dk = R + nr, vm = hp.head_dim_v_mla;  // absorbed key width, output width
  Grow(s->q, n * H * hk);
  Grow(s->kv, n * dk);
  Grow(s->qabs, n * H * dk);
  Grow(s->att, n * H * R);
  Grow(s->o, n * H * vm);
  // q [n, H, hk] = [q_nope | q_pe] per head
  if (w.wq_a.data) {
    const int64_t ql = w.wq_a.rows;
    Grow(s->qa, n * ql);
    kernels::MatMul(w.wq_a, xn, E, n, s->qa.data(), ql, pool, &s->mm);
    for (int64_t r = 0; r < n; ++r)
      kernels::RmsNorm(s->qa.data() + r * ql, w.q_a_norm.data(), s->qa.data() + r * ql, ql,
                       hp.rms_eps);
    kernels::MatMul(w.wq_b, s->qa.data(), ql, n, s->q.data(), H * hk, pool, &s->mm);
  } else {
    kernels::MatMul(w.wq, xn, E, n, s->q.data(), H * hk, pool, &s->mm);
  }
  // kv [n, R + nr] = [c | k_pe]
  kernels::MatMul(w.wkv_a, xn, E, n, s->kv.data(), dk, pool, &s->mm);
  for (int64_t r = 0; r < n; ++r) {
    float* q = s->q.data() + r * H * hk;
    float* kvr = s->kv.data() + r * dk;
    if (opt.rope) {
      const float* rc = rope + r * nr;
      for (int64_t h = 0; h < H; ++h)
        kernels::ApplyRope(opt.rope_params, rc, q + h * hk + nope, 1, static_cast<int>(nr));
      kernels::ApplyRope(opt.rope_params, rc, kvr + R, 1, static_cast<int>(nr));
    }
    kernels::RmsNorm(kvr, w.kv_a_norm.data(), kvr, R, hp.rms_eps);
  }
  // Q [n, H, R + nr] = [k_b q_nope | q_pe]
  for (int64_t h = 0; h < H; ++h)
    kernels::MatMul(w.wk_b[static_cast<size_t>(h)], s->q.data() + h * hk, H * hk, n,
                    s->qabs.data() + h * dk, H * dk, pool, &s->mm);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t h = 0; h < H; ++h)
      std::copy(s->q.data() + (r * H + h) * hk + nope, s->q.data() + (r * H + h) * hk + hk,
                s->qabs.data() + (r * H + h) * dk + R);

  // Cache the K rows; V is the first R elements of the same row.
  const KvLayout& lay = kv.layout();
  uint8_t* kb = kv.KBase(local_layer);
  for (const SeqChunk& c : b.chunks)
    for (int32_t i = 0; i < c.n_tokens; ++i) {
      const int32_t pos = c.pos0 + i;
      const int64_t blk = c.blocks[static_cast<size_t>(pos / lay.block_size)];
      const uint64_t slot = static_cast<uint64_t>(blk * lay.block_size + pos % lay.block_size);
      StoreKvRow(lay.dtype, s->kv.data() + (c.row0 + i) * dk, kb + slot * kv.k_row_bytes(), dk);
    }

  int32_t max_kv = 0;
  for (const SeqChunk& c : b.chunks) max_kv = std::max(max_kv, c.pos0 + c.n_tokens);
  const size_t per_thread = static_cast<size_t>(std::max<int64_t>(max_kv, R + kernels::kAttnTile));
  const int n_threads = pool ? pool->size() : 1;
  Grow(s->scratch, static_cast<int64_t>(per_thread) * n_threads);
  const bool tiled_ok = kernels::TiledNumericsApply(static_cast<int>(R));
  // (row, head) tasks; each row's heads split over the threads, rotating row by row (as the
  // llama-family attention does, so causal prompts balance).
  auto work = [&](int t, int nt) {
    float* scratch = s->scratch.data() + per_thread * static_cast<size_t>(t);
    size_t ci = 0;
    for (int64_t row = 0; row < n; ++row) {
      while (b.chunks[ci].row0 + b.chunks[ci].n_tokens <= row) ++ci;
      const SeqChunk& c = b.chunks[ci];
      const int64_t part = (t + row) % nt;
      const int64_t h0 = H * part / nt, h1 = H * (part + 1) / nt;
      const int32_t pos = c.pos0 + static_cast<int32_t>(row - c.row0);
      kernels::PagedKv pk;
      pk.k_base = kb;
      pk.v_base = kb;
      pk.k_row_stride = kv.k_row_bytes();
      pk.v_row_stride = kv.k_row_bytes();
      pk.dtype = lay.dtype;
      pk.block_size = lay.block_size;
      pk.blocks = c.blocks;
      for (int64_t h = h0; h < h1; ++h)
        kernels::AttendOneHead(s->qabs.data() + (row * H + h) * dk, static_cast<int>(dk),
                               static_cast<int>(R), opt.kq_scale, pk, pos + 1,
                               s->att.data() + (row * H + h) * R, scratch,
                               tiled_ok && pos < c.tiled_until);
    }
  };
  int64_t macs = 0;
  for (const SeqChunk& c : b.chunks)
    macs += int64_t{c.n_tokens} * (c.pos0 + c.n_tokens) * H * (dk + R);
  // Below ~2^17 multiply-adds waking the pool costs more than it saves (see kernels::MatMul).
  if (pool && macs >= (int64_t{1} << 17)) {
    pool->Run(work);
  } else {
    work(0, 1);
  }
  // o [n, H, vm] = v_b att per head
  for (int64_t h = 0; h < H; ++h)
    kernels::MatMul(w.wv_b[static_cast<size_t>(h)], s->att.data() + h * R, H * R, n,
                    s->o.data() + h * vm, H * vm, pool, &s->mm);
  if (w.gate.data) {
    Grow(s->gate, n * H * vm);
    kernels::MatMul(w.gate, xn, E, n, s->gate.data(), H * vm, pool, &s->mm);
    for (int64_t i = 0; i < n * H * vm; ++i) s->o[i] *= Sigmoid(s->gate[i]);
  }
  return s->o.data();
}

}  // namespace shoal
