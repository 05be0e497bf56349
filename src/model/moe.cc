// Mixture-of-experts routing (llama.cpp's build_moe_ffn) and grouped expert execution.
#include "model/moe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "model/weights.h"

namespace shoal {

namespace {
template <typename T>
void Grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

Result<ExpertMatrices> LoadExperts(const gguf::File& f, const std::string& name, int64_t cols,
                                   int64_t rows, int64_t n_expert) {
  ExpertMatrices m;
  SHOAL_ASSIGN_OR_RETURN(m.first, LoadMatrixSlice(f, name, cols, rows, n_expert, 0));
  m.stride = static_cast<uint64_t>(rows) * m.first.row_bytes;
  return m;
}
// Every member's expert outputs into s->expert_out: member k sends the outputs of slots
// offsets[its first expert] .. offsets[its end] (slots are grouped by expert, experts of a member
// are contiguous), so the gathered buffer lists all slots in `slots` order.
bool GatherExperts(const MoeShard& sh, int64_t NE, int64_t D, int64_t n_slots, MoeScratch* s) {
  s->counts.assign(static_cast<size_t>(sh.size), 0);
  for (int k = 0; k < sh.size; ++k) {
    const Slice ek = SliceOf(NE, sh.size, k);
    s->counts[static_cast<size_t>(k)] = (s->offsets[ek.end()] - s->offsets[ek.first]) * D;
  }
  const Slice own = SliceOf(NE, sh.size, sh.rank);
  const int32_t b = s->offsets[own.first], m = s->offsets[own.end()] - b;
  Grow(s->mine, int64_t{m} * D);
  for (int32_t i = 0; i < m; ++i) {
    const int64_t slot = s->slots[static_cast<size_t>(b + i)];
    std::copy(s->expert_out.data() + slot * D, s->expert_out.data() + (slot + 1) * D,
              s->mine.data() + int64_t{i} * D);
  }
  Status st = (sh.status && !sh.status->ok())
                  ? *sh.status
                  : sh.comm->AllGather({s->mine.data(), static_cast<size_t>(m * D)}, s->counts,
                                       &s->gathered);
  if (!st.ok()) {
    if (sh.status && sh.status->ok()) *sh.status = st;
    return false;
  }
  for (int64_t i = 0; i < n_slots; ++i) {
    const int64_t slot = s->slots[static_cast<size_t>(i)];
    std::copy(s->gathered.data() + i * D, s->gathered.data() + (i + 1) * D,
              s->expert_out.data() + slot * D);
  }
  return true;
}

}  // namespace

MoeConfig MoeConfigFrom(const HParams& hp) {
  MoeConfig c;
  c.n_expert = hp.n_expert;
  c.n_used = hp.n_expert_used;
  c.gating = hp.gating;
  c.norm_w = hp.expert_weights_norm;
  c.scale = hp.expert_weights_scale;
  return c;
}

Result<MoeWeights> LoadMoeWeights(const gguf::File& f, int il, int64_t n_router_in, int64_t n_in,
                                  int64_t n_ff_exp, int64_t n_expert) {
  auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
  MoeWeights w;
  SHOAL_ASSIGN_OR_RETURN(w.router, LoadMatrix(f, n("ffn_gate_inp.weight"), n_router_in, n_expert));
  SHOAL_ASSIGN_OR_RETURN(w.probs_bias, LoadOptionalVector(f, n("exp_probs_b.bias"), n_expert));
  SHOAL_ASSIGN_OR_RETURN(w.gate,
                         LoadExperts(f, n("ffn_gate_exps.weight"), n_in, n_ff_exp, n_expert));
  SHOAL_ASSIGN_OR_RETURN(w.up, LoadExperts(f, n("ffn_up_exps.weight"), n_in, n_ff_exp, n_expert));
  SHOAL_ASSIGN_OR_RETURN(w.down,
                         LoadExperts(f, n("ffn_down_exps.weight"), n_ff_exp, n_in, n_expert));
  return w;
}

void RunMoe(const MoeConfig& cfg, const MoeWeights& w, const float* xr, int64_t ldr, const float* x,
            int64_t ldx, int64_t n, float* out, ThreadPool* pool, MoeScratch* s,
            const MoeShard* shard, int64_t* routed) {
  const int64_t NE = cfg.n_expert, K = cfg.n_used, D = w.down.first.rows;
  Grow(s->logits, n * NE);
  Grow(s->chosen, n * K);
  Grow(s->weights, n * K);
  Grow(s->offsets, NE + 1);
  Grow(s->slots, n * K);
  Grow(s->expert_out, n * K * D);
  // Router logits in F32 (ffn_gate_inp stays F32 in llama.cpp's files: F32 activations).
  kernels::MatMul(w.router, xr, ldr, n, s->logits.data(), NE, pool, &s->ffn.mm);

  Grow(s->sel, NE);
  Grow(s->order, NE);
  Grow(s->fill, NE);
  float* sel = s->sel.data();
  int32_t* order = s->order.data();
  std::fill(s->offsets.begin(), s->offsets.begin() + NE + 1, 0);
  for (int64_t r = 0; r < n; ++r) {
    float* p = s->logits.data() + r * NE;  // becomes the probabilities
    if (cfg.gating == GatingFunc::kSoftmax) {
      kernels::Softmax(p, NE);
    } else {
      for (int64_t e = 0; e < NE; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
    }
    for (int64_t e = 0; e < NE; ++e) sel[e] = w.probs_bias.empty() ? p[e] : p[e] + w.probs_bias[e];
    for (int64_t e = 0; e < NE; ++e) order[e] = static_cast<int32_t>(e);
    // Top-k by selection score, descending; equal scores keep the lower expert id first.
    std::partial_sort(order, order + K, order + NE, [&](int32_t a, int32_t b) {
      return sel[a] > sel[b] || (sel[a] == sel[b] && a < b);
    });
    int32_t* ch = s->chosen.data() + r * K;
    float* wt = s->weights.data() + r * K;
    for (int64_t k = 0; k < K; ++k) {
      ch[k] = order[k];
      wt[k] = p[ch[k]];
      ++s->offsets[static_cast<size_t>(ch[k] + 1)];
    }
    if (cfg.norm_w) {
      double sum = 0;  // ggml_sum_rows accumulates in double
      for (int64_t k = 0; k < K; ++k) sum += wt[k];
      const float den = std::max(static_cast<float>(sum), 6.103515625e-5f);
      for (int64_t k = 0; k < K; ++k) wt[k] /= den;
    }
    if (cfg.scale != 0.f && cfg.scale != 1.f)
      for (int64_t k = 0; k < K; ++k) wt[k] *= cfg.scale;
  }
  if (routed)
    for (int64_t e = 0; e < NE; ++e) routed[e] += s->offsets[e + 1];
  // Group (row, k) slots by expert, rows ascending inside an expert.
  for (int64_t e = 0; e < NE; ++e) s->offsets[e + 1] += s->offsets[e];
  {
    int32_t* fill = s->fill.data();
    std::copy(s->offsets.begin(), s->offsets.begin() + NE, fill);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t k = 0; k < K; ++k) {
        const int32_t e = s->chosen[static_cast<size_t>(r * K + k)];
        s->slots[static_cast<size_t>(fill[e]++)] = static_cast<int32_t>(r * K + k);
      }
  }
  // One gate/up/down MatMul per touched expert over its rows (this member's experts only).
  const bool ep = shard && shard->size > 1;
  const Slice own = ep ? SliceOf(NE, shard->size, shard->rank) : Slice{0, NE};
  for (int64_t e = own.first; e < own.end(); ++e) {
    const int32_t b = s->offsets[e], m = s->offsets[e + 1] - b;
    if (m == 0) continue;
    const int64_t in_w = w.gate.first.cols;
    Grow(s->xg, int64_t{m} * in_w);
    Grow(s->yg, int64_t{m} * D);
    for (int32_t i = 0; i < m; ++i) {
      const int64_t row = s->slots[static_cast<size_t>(b + i)] / K;
      std::copy(x + row * ldx, x + row * ldx + in_w, s->xg.data() + int64_t{i} * in_w);
    }
    DenseFfn ffn{w.gate.Expert(e), w.up.Expert(e), w.down.Expert(e)};
    RunDenseFfn(ffn, cfg.act, s->xg.data(), in_w, m, s->yg.data(), D, pool, &s->ffn);
    for (int32_t i = 0; i < m; ++i) {
      const int64_t slot = s->slots[static_cast<size_t>(b + i)];
      std::copy(s->yg.data() + int64_t{i} * D, s->yg.data() + int64_t{i + 1} * D,
                s->expert_out.data() + slot * D);
    }
  }
  if (ep && !GatherExperts(*shard, NE, D, n * K, s)) {
    std::fill(out, out + n * D, 0.f);
    return;
  }
  // Weighted sum in top-k order.
  for (int64_t r = 0; r < n; ++r) {
    float* o = out + r * D;
    const float* wt = s->weights.data() + r * K;
    const float* eo = s->expert_out.data() + r * K * D;
    for (int64_t d = 0; d < D; ++d) o[d] = eo[d] * wt[0];
    for (int64_t k = 1; k < K; ++k)
      for (int64_t d = 0; d < D; ++d) o[d] += eo[k * D + d] * wt[k];
  }
}

}  // namespace shoal
