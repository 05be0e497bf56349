// Scalar implementations of the float ops; attention dispatches to attention_x86.cc where the
// CPU has AVX2/F16C and keeps the scalar reference here.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/fp16.h"
#include "kernels/attention_internal.h"

namespace shoal::kernels {

void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0.0;
  // Squares are rounded to float before the double sum, as ggml does.
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

namespace {
// ggml's YaRN ramp between the correction dims.
float RopeYarnRamp(float low, float high, int i0) {
  const float y = (static_cast<float>(i0 / 2) - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}
// Dimension index at which `n_rot` rotations happen over the original context.
float YarnCorrDim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}
}  // namespace

void RopeCache(const RopeParams& p, int32_t pos, float* cache) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float corr0 = 0, corr1 = 0;
  if (p.ext_factor != 0.f) {
    const float start = std::floor(YarnCorrDim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base));
    const float end = std::ceil(YarnCorrDim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base));
    corr0 = std::max(0.0f, start);
    corr1 = std::min(static_cast<float>(p.n_rot - 1), end);
  }
  float theta = static_cast<float>(pos);
  for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
    const float theta_interp = p.freq_scale * theta;
    float th = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float ramp_mix = RopeYarnRamp(corr0, corr1, i0) * p.ext_factor;
      th = theta_interp * (1 - ramp_mix) + theta * ramp_mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cache[i0] = std::cos(th) * mscale;
    cache[i0 + 1] = std::sin(th) * mscale;
    theta *= theta_scale;
  }
}

void ApplyRope(const RopeParams& p, const float* cache, float* x, int n_heads, int head_dim) {
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    if (p.mode == RopeMode::kNorm) {
      for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
        const float c = cache[i0], s = cache[i0 + 1];
        const float a = v[i0], b = v[i0 + 1];
        v[i0] = a * c - b * s;
        v[i0 + 1] = a * s + b * c;
      }
    } else {
      const int half = p.n_rot / 2;
      for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
        const float c = cache[i0], s = cache[i0 + 1];
        const int i = i0 / 2;
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = a * s + b * c;
      }
    }
  }
}

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

void SwiGlu(const float* g, const float* u, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Silu(g[i]) * u[i];
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

namespace {

inline const uint8_t* KvRow(const uint8_t* base, uint64_t stride, const PagedKv& kv, int32_t p) {
  const int64_t block = kv.blocks[static_cast<size_t>(p / kv.block_size)];
  const int64_t slot = p % kv.block_size;
  return base + static_cast<uint64_t>(block * kv.block_size + slot) * stride;
}

// F16 cache: mirrors ggml_compute_forward_flash_attn_ext_f16 for F16 K/V.
void AttendF16(const float* q, int dk, int dv, float scale, const PagedKv& kv, int32_t n_kv,
               float* out, float* scratch) {
  // q rounded to F16 once; dots accumulate in F32.
  uint16_t qh[1024];
  float qf[1024];
  for (int i = 0; i < dk; ++i) {
    qh[i] = Fp32ToFp16(q[i]);
    qf[i] = Fp16ToFp32(qh[i]);
  }
  // The V accumulator is held in F16 values (rounded after every update), stored as floats.
  float* acc = scratch;
  std::fill(acc, acc + dv, 0.0f);
  float m = -INFINITY, s = 0.0f;
  for (int32_t j = 0; j < n_kv; ++j) {
    const uint16_t* kr =
        reinterpret_cast<const uint16_t*>(KvRow(kv.k_base, kv.k_row_stride, kv, j)) +
        kv.k_head_offset;
    const uint16_t* vr =
        reinterpret_cast<const uint16_t*>(KvRow(kv.v_base, kv.v_row_stride, kv, j)) +
        kv.v_head_offset;
    // ggml_vec_dot_f16: float products summed in double (its tail loop; exact for dk < 64).
    double dot = 0.0;
    for (int i = 0; i < dk; ++i) dot += static_cast<double>(qf[i] * Fp16ToFp32(kr[i]));
    const float x = static_cast<float>(dot) * scale;
    const float m_old = m;
    float ms = 1.0f, vs = 1.0f;
    if (x > m) {
      m = x;
      ms = std::exp(m_old - m);
      for (int i = 0; i < dv; ++i) acc[i] = Fp16ToFp32(Fp32ToFp16(acc[i] * ms));
    } else {
      vs = std::exp(x - m);
    }
    // ggml_vec_mad_f16 (its scalar tail, all of it for dv < 64): multiply, add, round to F16.
    for (int i = 0; i < dv; ++i) {
      const float prod = Fp16ToFp32(vr[i]) * vs;
      acc[i] = Fp16ToFp32(Fp32ToFp16(acc[i] + prod));
    }
    s = s * ms + vs;
  }
  const float inv = s > 0 ? 1.0f / s : 0.0f;
  for (int i = 0; i < dv; ++i) out[i] = acc[i] * inv;
}

// F32 cache: scores, softmax and weighted sum all in F32 (two passes, like the non-flash path).
void AttendF32(const float* q, int dk, int dv, float scale, const PagedKv& kv, int32_t n_kv,
               float* out, float* scratch) {
  float m = -INFINITY;
  // scratch holds n_kv scores followed by nothing else: caller sizes it max(dv, n_kv).
  for (int32_t j = 0; j < n_kv; ++j) {
    const float* kr =
        reinterpret_cast<const float*>(KvRow(kv.k_base, kv.k_row_stride, kv, j)) + kv.k_head_offset;
    float dot = 0.0f;
    for (int i = 0; i < dk; ++i) dot += q[i] * kr[i];
    scratch[j] = dot * scale;
    m = std::max(m, scratch[j]);
  }
  double sum = 0.0;
  for (int32_t j = 0; j < n_kv; ++j) {
    scratch[j] = std::exp(scratch[j] - m);
    sum += scratch[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  std::fill(out, out + dv, 0.0f);
  for (int32_t j = 0; j < n_kv; ++j) {
    const float* vr =
        reinterpret_cast<const float*>(KvRow(kv.v_base, kv.v_row_stride, kv, j)) + kv.v_head_offset;
    const float w = scratch[j] * inv;
    for (int i = 0; i < dv; ++i) out[i] += vr[i] * w;
  }
}

// F16 cache, tiled numerics: mirrors ggml's tiled CPU flash attention, which llama.cpp uses for
// batches of >= 64 query rows: q stays F32, scores and the value sum are F32 FMA chains, and the
// online softmax rescales once per tile of kAttnTile keys.
void AttendF16Tiled(const float* q, int dk, int dv, float scale, const PagedKv& kv, int32_t n_kv,
                    float* out, float* scratch) {
  float* acc = scratch;     // [dv]
  float* p = scratch + dv;  // [kAttnTile]
  std::fill(acc, acc + dv, 0.0f);
  float m = -INFINITY, s = 0.0f;
  for (int32_t t0 = 0; t0 < n_kv; t0 += kAttnTile) {
    const int32_t t1 = std::min(n_kv, t0 + kAttnTile);
    float tile_max = -INFINITY;
    for (int32_t j = t0; j < t1; ++j) {
      const uint16_t* kr =
          reinterpret_cast<const uint16_t*>(KvRow(kv.k_base, kv.k_row_stride, kv, j)) +
          kv.k_head_offset;
      float dot = 0.0f;
      for (int i = 0; i < dk; ++i) dot = std::fma(q[i], Fp16ToFp32(kr[i]), dot);
      p[j - t0] = dot * scale;
      tile_max = std::max(tile_max, p[j - t0]);
    }
    const float m_new = std::max(m, tile_max);
    if (m_new > m && m != -INFINITY) {
      const float ms = std::exp(m - m_new);
      for (int i = 0; i < dv; ++i) acc[i] *= ms;
      s *= ms;
    }
    m = m_new;
    double tile_sum = 0.0;
    for (int32_t j = t0; j < t1; ++j) {
      p[j - t0] = std::exp(p[j - t0] - m);
      tile_sum += p[j - t0];
    }
    s = static_cast<float>(static_cast<double>(s) + tile_sum);
    for (int32_t j = t0; j < t1; ++j) {
      const uint16_t* vr =
          reinterpret_cast<const uint16_t*>(KvRow(kv.v_base, kv.v_row_stride, kv, j)) +
          kv.v_head_offset;
      const float w = p[j - t0];
      for (int i = 0; i < dv; ++i) acc[i] = std::fma(w, Fp16ToFp32(vr[i]), acc[i]);
    }
  }
  const float inv = s > 0 ? 1.0f / s : 0.0f;
  for (int i = 0; i < dv; ++i) out[i] = acc[i] * inv;
}

}  // namespace

namespace internal {

void AttendOneHeadReference(const float* q, int dk, int dv, float scale, const PagedKv& kv,
                            int32_t n_kv, float* out, float* scratch, bool tiled) {
  if (kv.dtype == DType::kF16) {
    if (tiled) {
      AttendF16Tiled(q, dk, dv, scale, kv, n_kv, out, scratch);
    } else {
      AttendF16(q, dk, dv, scale, kv, n_kv, out, scratch);
    }
  } else {
    AttendF32(q, dk, dv, scale, kv, n_kv, out, scratch);
  }
}

}  // namespace internal

void AttendOneHead(const float* q, int dk, int dv, float scale, const PagedKv& kv, int32_t n_kv,
                   float* out, float* scratch, bool tiled) {
  if (internal::AttendOneHeadAvx2(q, dk, dv, scale, kv, n_kv, out, scratch, tiled)) return;
  internal::AttendOneHeadReference(q, dk, dv, scale, kv, n_kv, out, scratch, tiled);
}

size_t AttendHeadsScratch(int n_heads, int dk, int dv, int32_t n_kv) {
  // The tiled path's kt, vf, p and per-head state (attention_x86.cc), plus 8 floats to align.
  const size_t tiled =
      static_cast<size_t>(dk + 1 + dv) * kAttnTile + static_cast<size_t>(n_heads) * (dv + 2) + 8;
  return std::max(tiled, static_cast<size_t>(std::max(n_kv, dv + kAttnTile)));
}

void AttendHeads(const float* q, int64_t q_stride, int n_heads, int dk, int dv, float scale,
                 const PagedKv& kv, int32_t n_kv, float* out, int64_t out_stride, float* scratch,
                 bool tiled) {
  if (tiled && n_heads > 1) {
    auto* aligned =
        reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 31) & ~uintptr_t{31});
    if (internal::AttendHeadsTiledAvx2(q, q_stride, n_heads, dk, dv, scale, kv, n_kv, out,
                                       out_stride, aligned))
      return;
  }
  for (int h = 0; h < n_heads; ++h)
    AttendOneHead(q + h * q_stride, dk, dv, scale, kv, n_kv, out + h * out_stride, scratch, tiled);
}

}  // namespace shoal::kernels
