// KDA forward: projections, conv + silu, L2 norms, gates, sequential delta-rule scan per chunk.
#include "model/kda.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"

namespace shoal {

namespace {
template <typename T>
void Grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}
inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// ggml_l2_norm: x / max(||x||, eps), the sum of squares in double.
void L2Norm(float* x, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::max(std::sqrt(static_cast<float>(sum)), eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}
}  // namespace

int64_t KdaState::ConvFloats(const HParams& hp, int64_t heads) {
  return 3 * (hp.ssm_d_conv - 1) * heads * hp.kda_head_dim;
}

int64_t KdaState::Floats(const HParams& hp, int64_t heads) {
  return ConvFloats(hp, heads) + heads * hp.kda_head_dim * hp.kda_head_dim;
}

KdaState KdaState::At(const HParams& hp, int64_t heads, float* base) {
  return KdaState{base, base + ConvFloats(hp, heads)};
}

Result<KdaWeights> LoadKdaWeights(const gguf::File& f, const HParams& hp, int il) {
  auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
  const int64_t E = hp.n_embd, hd = hp.kda_head_dim, H = hp.n_head, di = H * hd;
  KdaWeights w;
  SHOAL_ASSIGN_OR_RETURN(w.wq, LoadMatrix(f, n("attn_q.weight"), E, di));
  SHOAL_ASSIGN_OR_RETURN(w.wk, LoadMatrix(f, n("attn_k.weight"), E, di));
  SHOAL_ASSIGN_OR_RETURN(w.wv, LoadMatrix(f, n("attn_v.weight"), E, di));
  // ne {d_conv, 1, d_inner(, 1)}: channel c's taps are contiguous.
  SHOAL_ASSIGN_OR_RETURN(w.conv_q, LoadVector(f, n("ssm_conv1d_q.weight"), hp.ssm_d_conv * di));
  SHOAL_ASSIGN_OR_RETURN(w.conv_k, LoadVector(f, n("ssm_conv1d_k.weight"), hp.ssm_d_conv * di));
  SHOAL_ASSIGN_OR_RETURN(w.conv_v, LoadVector(f, n("ssm_conv1d_v.weight"), hp.ssm_d_conv * di));
  SHOAL_ASSIGN_OR_RETURN(w.f_a, LoadMatrix(f, n("ssm_f_a.weight"), E, hd));
  SHOAL_ASSIGN_OR_RETURN(w.f_b, LoadMatrix(f, n("ssm_f_b.weight"), hd, di));
  SHOAL_ASSIGN_OR_RETURN(w.beta, LoadMatrix(f, n("ssm_beta.weight"), E, H));
  SHOAL_ASSIGN_OR_RETURN(w.a, LoadVector(f, n("ssm_a"), H));
  SHOAL_ASSIGN_OR_RETURN(w.dt_bias, LoadVector(f, n("ssm_dt.bias"), di));
  SHOAL_ASSIGN_OR_RETURN(w.g, LoadMatrix(f, n("ssm_g.weight"), E, di));
  SHOAL_ASSIGN_OR_RETURN(w.o_norm, LoadVector(f, n("ssm_norm.weight"), hd));
  SHOAL_ASSIGN_OR_RETURN(w.wo, LoadMatrix(f, n("attn_output.weight"), di, E));
  return w;
}

KdaWeights SliceKdaHeads(const KdaWeights& w, const HParams& hp, Slice heads, Slice emb) {
  const int64_t hd = hp.kda_head_dim, dc = hp.ssm_d_conv;
  const Slice ch{heads.first * hd, heads.count * hd};
  auto part = [](const std::vector<float>& v, int64_t first, int64_t count) {
    return std::vector<float>(v.begin() + first, v.begin() + first + count);
  };
  KdaWeights m;
  m.wq = RowSlice(w.wq, ch);
  m.wk = RowSlice(w.wk, ch);
  m.wv = RowSlice(w.wv, ch);
  m.conv_q = part(w.conv_q, ch.first * dc, ch.count * dc);
  m.conv_k = part(w.conv_k, ch.first * dc, ch.count * dc);
  m.conv_v = part(w.conv_v, ch.first * dc, ch.count * dc);
  m.f_a = w.f_a;
  m.f_b = RowSlice(w.f_b, ch);
  m.beta = RowSlice(w.beta, heads);
  m.a = part(w.a, heads.first, heads.count);
  m.dt_bias = part(w.dt_bias, ch.first, ch.count);
  m.g = RowSlice(w.g, ch);
  m.o_norm = w.o_norm;
  m.wo = RowSlice(w.wo, emb);
  return m;
}

void RunKda(const HParams& hp, const KdaWeights& w, const float* xn, const Batch& b,
            std::vector<KdaState*>& states, float* out, ThreadPool* pool, KdaScratch* s) {
  const float* o = RunKdaHeads(hp, w, xn, b, states, pool, s);
  kernels::MatMul(w.wo, o, w.heads() * hp.kda_head_dim, b.n_rows(), out, hp.n_embd, pool, &s->mm);
}

const float* RunKdaHeads(const HParams& hp, const KdaWeights& w, const float* xn, const Batch& b,
                         std::vector<KdaState*>& states, ThreadPool* pool, KdaScratch* s) {
  // H: the heads w holds (a tensor-parallel member's slice, or all of them).
  const int64_t n = b.n_rows(), E = hp.n_embd, H = w.heads(), hd = hp.kda_head_dim;
  const int64_t di = H * hd, dc = hp.ssm_d_conv;
  Grow(s->q, n * di);
  Grow(s->k, n * di);
  Grow(s->v, n * di);
  Grow(s->fa, n * hd);
  Grow(s->gate, n * di);
  Grow(s->beta, n * H);
  Grow(s->og, n * di);
  Grow(s->o, n * di);
  kernels::MatMul(w.wq, xn, E, n, s->q.data(), di, pool, &s->mm);
  kernels::MatMul(w.wk, xn, E, n, s->k.data(), di, pool, &s->mm);
  kernels::MatMul(w.wv, xn, E, n, s->v.data(), di, pool, &s->mm);
  kernels::MatMul(w.f_a, xn, E, n, s->fa.data(), hd, pool, &s->mm);
  kernels::MatMul(w.f_b, s->fa.data(), hd, n, s->gate.data(), di, pool, &s->mm);
  kernels::MatMul(w.beta, xn, E, n, s->beta.data(), H, pool, &s->mm);
  kernels::MatMul(w.g, xn, E, n, s->og.data(), di, pool, &s->mm);
  const float eps = hp.rms_eps;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float>* proj[3] = {&s->q, &s->k, &s->v};
  const std::vector<float>* conv_w[3] = {&w.conv_q, &w.conv_k, &w.conv_v};
  for (size_t ci = 0; ci < b.chunks.size(); ++ci) {
    const SeqChunk& c = b.chunks[ci];
    KdaState& st = *states[ci];
    for (int32_t t = 0; t < c.n_tokens; ++t) {
      const int64_t r = c.row0 + t;
      // Causal depthwise conv over [state (dc - 1 rows) | this row], then silu; shift the state.
      for (int j = 0; j < 3; ++j) {
        float* x = proj[j]->data() + r * di;
        float* cs = st.conv + static_cast<int64_t>(j) * (dc - 1) * di;  // [dc-1][di]
        const float* cw = conv_w[j]->data();
        for (int64_t ch = 0; ch < di; ++ch) {
          float sum = 0.f;
          for (int64_t kk = 0; kk < dc - 1; ++kk) sum += cs[kk * di + ch] * cw[ch * dc + kk];
          sum += x[ch] * cw[ch * dc + dc - 1];
          for (int64_t kk = 0; kk + 1 < dc - 1; ++kk) cs[kk * di + ch] = cs[(kk + 1) * di + ch];
          if (dc > 1) cs[(dc - 2) * di + ch] = x[ch];
          x[ch] = kernels::Silu(sum);
        }
      }
      float* q = s->q.data() + r * di;
      float* k = s->k.data() + r * di;
      const float* v = s->v.data() + r * di;
      float* g = s->gate.data() + r * di;
      for (int64_t h = 0; h < H; ++h) {
        L2Norm(q + h * hd, hd, eps);
        L2Norm(k + h * hd, hd, eps);
        const float beta = Sigmoid(s->beta[static_cast<size_t>(r * H + h)]);
        // g = lower_bound * sigmoid(-(a * (f_b f_a x + dt_bias))), per channel
        for (int64_t i = 0; i < hd; ++i) {
          const int64_t ch = h * hd + i;
          const float x1 =
              (g[ch] + w.dt_bias[static_cast<size_t>(ch)]) * w.a[static_cast<size_t>(h)];
          g[ch] = Sigmoid(-x1) * hp.kda_gate_lower_bound;
        }
        // S <- diag(exp(g)) S; delta = beta (v - S^T k); S <- S + k delta^T; o = S^T q * scale
        float* S = st.s + h * hd * hd;  // [key i][value j]
        float* o = s->o.data() + r * di + h * hd;
        for (int64_t i = 0; i < hd; ++i) {
          const float d = std::exp(g[h * hd + i]);
          for (int64_t j = 0; j < hd; ++j) S[i * hd + j] *= d;
        }
        float delta[256];
        for (int64_t j = 0; j < hd; ++j) {
          float sk = 0.f;
          for (int64_t i = 0; i < hd; ++i) sk += S[i * hd + j] * k[h * hd + i];
          delta[j] = (v[h * hd + j] - sk) * beta;
        }
        for (int64_t i = 0; i < hd; ++i)
          for (int64_t j = 0; j < hd; ++j) S[i * hd + j] += k[h * hd + i] * delta[j];
        for (int64_t j = 0; j < hd; ++j) {
          float acc = 0.f;
          for (int64_t i = 0; i < hd; ++i) acc += S[i * hd + j] * q[h * hd + i];
          o[j] = acc * scale;
        }
        // o = rmsnorm(o) * ssm_norm * sigmoid(ssm_g x)
        kernels::RmsNorm(o, w.o_norm.data(), o, hd, eps);
        for (int64_t j = 0; j < hd; ++j)
          o[j] *= Sigmoid(s->og[static_cast<size_t>(r * di + h * hd + j)]);
      }
    }
  }
  return s->o.data();
}

}  // namespace shoal
