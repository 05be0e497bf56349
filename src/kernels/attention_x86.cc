// AVX2/FMA/F16C attention over the paged KV cache: the exact arithmetic of the scalar reference
// in ops.cc, vectorized across keys for the q.k dots and across dims for the value sums.
//
// Bit-exactness: F16C conversions are exact (F16 -> F32) or round to nearest even (F32 -> F16),
// as the reference's bit tricks; each score keeps the reference's order (products in F32, summed
// in index order: in double, in an F32 FMA chain or in F32 adds), because key j of a group of 8
// owns lane j and the loop walks the dims in order; each value lane is one dim, updated key by
// key in order with the same expression. Only NaN payloads could differ (F16C keeps them).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention_internal.h"

namespace shoal::kernels::internal {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

#define SHOAL_AVX2 __attribute__((target("avx2,fma,f16c")))

constexpr int kKeys = 8;  // keys per score group: one 8-lane register, key j in lane j

inline const uint8_t* KvRow(const uint8_t* base, uint64_t stride, const PagedKv& kv, int32_t p) {
  const int64_t block = kv.blocks[static_cast<size_t>(p / kv.block_size)];
  const int64_t slot = p % kv.block_size;
  return base + static_cast<uint64_t>(block * kv.block_size + slot) * stride;
}

// Rows of consecutive positions from p on, without a division per row (two integer divisions per
// key were a third of the tiled score loop).
class KvRowWalker {
 public:
  KvRowWalker(const uint8_t* base, uint64_t stride, const PagedKv& kv, int32_t p)
      : base_(base), stride_(stride), kv_(kv), b_(p / kv.block_size), slot_(p % kv.block_size) {}
  const uint8_t* Next() {
    const int64_t block = kv_.blocks[static_cast<size_t>(b_)];
    const uint8_t* row = base_ + static_cast<uint64_t>(block * kv_.block_size + slot_) * stride_;
    if (++slot_ == kv_.block_size) {
      slot_ = 0;
      ++b_;
    }
    return row;
  }

 private:
  const uint8_t* base_;
  uint64_t stride_;
  const PagedKv& kv_;
  int32_t b_, slot_;
};

// 8x8 transpose: r[j] holds row j (8 dims); afterwards r[i] holds dim i of rows 0..7.
SHOAL_AVX2 inline void Transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

SHOAL_AVX2 inline __m256 LoadHalf8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// F32 -> F16 (nearest even) -> F32, as Fp16ToFp32(Fp32ToFp16(x)).
SHOAL_AVX2 inline __m256 RoundHalf8(__m256 x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

enum class Sum { kDouble, kFma, kF32 };

// Raw dots of keys [j0, j0 + 8) (rows past n_kv repeat the last one and are ignored):
// out[j] = sum over i in index order, per kSum (double sum of F32 products; F32 FMA chain;
// F32 product then F32 add). Half rows are F16 (kF16), else F32.
template <Sum kSum, bool kF16>
SHOAL_AVX2 void Dots8(const float* q, int dk, const PagedKv& kv, int32_t j0, int32_t n_kv,
                      float* out) {
  const uint8_t* rows[kKeys];
  for (int j = 0; j < kKeys; ++j) {
    const int32_t p = std::min(j0 + j, n_kv - 1);
    rows[j] = KvRow(kv.k_base, kv.k_row_stride, kv, p) +
              kv.k_head_offset * static_cast<int64_t>(kF16 ? 2 : 4);
  }
  __m256d dlo = _mm256_setzero_pd(), dhi = _mm256_setzero_pd();
  __m256 acc = _mm256_setzero_ps();
  for (int i0 = 0; i0 < dk; i0 += 8) {
    __m256 r[8];
    for (int j = 0; j < kKeys; ++j) {
      if constexpr (kF16) {
        r[j] = LoadHalf8(reinterpret_cast<const uint16_t*>(rows[j]) + i0);
      } else {
        r[j] = _mm256_loadu_ps(reinterpret_cast<const float*>(rows[j]) + i0);
      }
    }
    Transpose8(r);
    for (int i = 0; i < 8; ++i) {
      const __m256 qi = _mm256_set1_ps(q[i0 + i]);
      if constexpr (kSum == Sum::kDouble) {
        const __m256 prod = _mm256_mul_ps(qi, r[i]);
        dlo = _mm256_add_pd(dlo, _mm256_cvtps_pd(_mm256_castps256_ps128(prod)));
        dhi = _mm256_add_pd(dhi, _mm256_cvtps_pd(_mm256_extractf128_ps(prod, 1)));
      } else if constexpr (kSum == Sum::kFma) {
        acc = _mm256_fmadd_ps(qi, r[i], acc);
      } else {
        acc = _mm256_add_ps(acc, _mm256_mul_ps(qi, r[i]));
      }
    }
  }
  if constexpr (kSum == Sum::kDouble) {
    alignas(32) double d[kKeys];
    _mm256_store_pd(d, dlo);
    _mm256_store_pd(d + 4, dhi);
    for (int j = 0; j < kKeys; ++j) out[j] = static_cast<float>(d[j]);
  } else {
    _mm256_storeu_ps(out, acc);
  }
}

// F16 cache, one-chunk numerics (the reference's AttendF16).
SHOAL_AVX2 void AttendF16(const float* q, int dk, int dv, float scale, const PagedKv& kv,
                          int32_t n_kv, float* out, float* scratch) {
  alignas(32) float qf[1024];
  for (int i = 0; i < dk; i += 8) _mm256_store_ps(qf + i, RoundHalf8(_mm256_loadu_ps(q + i)));
  float* acc = scratch;
  std::fill(acc, acc + dv, 0.0f);
  float m = -INFINITY, s = 0.0f;
  alignas(32) float dots[kKeys];
  for (int32_t j0 = 0; j0 < n_kv; j0 += kKeys) {
    Dots8<Sum::kDouble, true>(qf, dk, kv, j0, n_kv, dots);
    const int32_t j1 = std::min(n_kv, j0 + kKeys);
    for (int32_t j = j0; j < j1; ++j) {
      const uint16_t* vr =
          reinterpret_cast<const uint16_t*>(KvRow(kv.v_base, kv.v_row_stride, kv, j)) +
          kv.v_head_offset;
      const float x = dots[j - j0] * scale;
      const float m_old = m;
      float ms = 1.0f, vs = 1.0f;
      if (x > m) {
        m = x;
        ms = std::exp(m_old - m);
        const __m256 vms = _mm256_set1_ps(ms);
        for (int i = 0; i < dv; i += 8)
          _mm256_storeu_ps(acc + i, RoundHalf8(_mm256_mul_ps(_mm256_loadu_ps(acc + i), vms)));
      } else {
        vs = std::exp(x - m);
      }
      const __m256 vvs = _mm256_set1_ps(vs);
      for (int i = 0; i < dv; i += 8) {
        const __m256 prod = _mm256_mul_ps(LoadHalf8(vr + i), vvs);
        _mm256_storeu_ps(acc + i, RoundHalf8(_mm256_add_ps(_mm256_loadu_ps(acc + i), prod)));
      }
      s = s * ms + vs;
    }
  }
  const float inv = s > 0 ? 1.0f / s : 0.0f;
  for (int i = 0; i < dv; ++i) out[i] = acc[i] * inv;
}

// F32 cache (the reference's AttendF32): scores, softmax, weighted sum.
SHOAL_AVX2 void AttendF32(const float* q, int dk, int dv, float scale, const PagedKv& kv,
                          int32_t n_kv, float* out, float* scratch) {
  float m = -INFINITY;
  alignas(32) float dots[kKeys];
  for (int32_t j0 = 0; j0 < n_kv; j0 += kKeys) {
    Dots8<Sum::kF32, false>(q, dk, kv, j0, n_kv, dots);
    const int32_t j1 = std::min(n_kv, j0 + kKeys);
    for (int32_t j = j0; j < j1; ++j) {
      scratch[j] = dots[j - j0] * scale;
      m = std::max(m, scratch[j]);
    }
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
    const __m256 w = _mm256_set1_ps(scratch[j] * inv);
    for (int i = 0; i < dv; i += 8) {
      const __m256 prod = _mm256_mul_ps(_mm256_loadu_ps(vr + i), w);
      _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(out + i), prod));
    }
  }
}

// Dots8<Sum::kFma, true> for the G groups of 8 keys [j0, j0 + 8G), their FMA chains interleaved:
// one group's chain (dk dependent FMAs) left the score loop latency-bound (Zen 5: 4 cycles per
// FMA, 32 cycles per key at dk = 64). Same loads, transposes and per-lane FMA order per group.
template <int G>
SHOAL_AVX2 void DotsFmaF16(const float* q, int dk, const PagedKv& kv, int32_t j0, int32_t n_kv,
                           float* out) {
  // Whole groups only: every key is below n_kv.
  const uint16_t* rows[G][kKeys];
  KvRowWalker walk(kv.k_base, kv.k_row_stride, kv, j0);
  for (int g = 0; g < G; ++g) {
    for (int j = 0; j < kKeys; ++j)
      rows[g][j] = reinterpret_cast<const uint16_t*>(walk.Next()) + kv.k_head_offset;
  }
  (void)n_kv;
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  for (int i0 = 0; i0 < dk; i0 += 8) {
    for (int g = 0; g < G; ++g) {
      __m256 r[8];
      for (int j = 0; j < kKeys; ++j) r[j] = LoadHalf8(rows[g][j] + i0);
      Transpose8(r);
      for (int i = 0; i < 8; ++i) acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(q[i0 + i]), r[i], acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + kKeys * g, acc[g]);
}

// The tile's raw scores p[j - t0] = dot(q, k_j) * scale and their max.
SHOAL_AVX2 float TileScores(const float* q, int dk, float scale, const PagedKv& kv, int32_t t0,
                            int32_t t1, int32_t n_kv, float* p) {
  constexpr int kGroups = 4;  // independent FMA chains in flight (16 registers of AVX2)
  alignas(32) float dots[kKeys * kGroups];
  float tile_max = -INFINITY;
  for (int32_t j0 = t0; j0 < t1;) {
    int32_t n;
    if (t1 - j0 >= kKeys * kGroups) {
      DotsFmaF16<kGroups>(q, dk, kv, j0, n_kv, dots);
      n = kKeys * kGroups;
    } else {
      Dots8<Sum::kFma, true>(q, dk, kv, j0, n_kv, dots);
      n = std::min(kKeys, t1 - j0);
    }
    for (int32_t j = j0; j < j0 + n; ++j) {
      p[j - t0] = dots[j - j0] * scale;
      tile_max = std::max(tile_max, p[j - t0]);
    }
    j0 += n;
  }
  return tile_max;
}

// AttendF16Tiled for a fixed value width: the accumulator lives in kDv / 8 registers instead of
// scratch (the store-reload of every lane per key was the value loop's critical path). Same
// operations in the same order, so the same bits.
template <int kDv>
SHOAL_AVX2 void AttendF16TiledFixed(const float* q, int dk, float scale, const PagedKv& kv,
                                    int32_t n_kv, float* out, float* scratch) {
  constexpr int kRegs = kDv / 8;
  float* p = scratch + kDv;  // [kAttnTile]
  __m256 acc[kRegs];
  for (int i = 0; i < kRegs; ++i) acc[i] = _mm256_setzero_ps();
  float m = -INFINITY, s = 0.0f;
  for (int32_t t0 = 0; t0 < n_kv; t0 += kAttnTile) {
    const int32_t t1 = std::min(n_kv, t0 + kAttnTile);
    const float tile_max = TileScores(q, dk, scale, kv, t0, t1, n_kv, p);
    const float m_new = std::max(m, tile_max);
    if (m_new > m && m != -INFINITY) {
      const float ms = std::exp(m - m_new);
      const __m256 vms = _mm256_set1_ps(ms);
      for (int i = 0; i < kRegs; ++i) acc[i] = _mm256_mul_ps(acc[i], vms);
      s *= ms;
    }
    m = m_new;
    double tile_sum = 0.0;
    for (int32_t j = t0; j < t1; ++j) {
      p[j - t0] = std::exp(p[j - t0] - m);
      tile_sum += p[j - t0];
    }
    s = static_cast<float>(static_cast<double>(s) + tile_sum);
    KvRowWalker walk(kv.v_base, kv.v_row_stride, kv, t0);
    for (int32_t j = t0; j < t1; ++j) {
      const uint16_t* vr = reinterpret_cast<const uint16_t*>(walk.Next()) + kv.v_head_offset;
      const __m256 w = _mm256_set1_ps(p[j - t0]);
      for (int i = 0; i < kRegs; ++i) acc[i] = _mm256_fmadd_ps(w, LoadHalf8(vr + 8 * i), acc[i]);
    }
  }
  const float inv = s > 0 ? 1.0f / s : 0.0f;
  alignas(32) float a[kDv];
  for (int i = 0; i < kRegs; ++i) _mm256_store_ps(a + 8 * i, acc[i]);
  for (int i = 0; i < kDv; ++i) out[i] = a[i] * inv;
}

// AttendF16TiledFixed<kDv> for G query heads sharing one KV head (GQA): per tile of kAttnTile
// keys, the K rows are converted and transposed once into kt ([dk][kAttnTile] F32) and the V rows
// converted once into vf ([kAttnTile][kDv] F32); each head then runs the same FMA chains (score
// lanes over the dims in order, value lanes over the keys in order) from L1, with its softmax
// state (acc, m, s) kept in scratch between tiles. So the bits are those of G AttendOneHead
// calls, while the F16 loads, conversions and transposes are paid once instead of G times.
template <int kDv>
SHOAL_AVX2 void AttendF16TiledHeads(const float* q, int64_t q_stride, int G, int dk, float scale,
                                    const PagedKv& kv, int32_t n_kv, float* out, int64_t out_stride,
                                    float* scratch) {
  constexpr int kT = kAttnTile, kGroups = kT / kKeys, kRegs = kDv / 8;
  float* kt = scratch;         // [dk][kT]
  float* vf = kt + dk * kT;    // [kT][kDv]
  float* p = vf + kT * kDv;    // [kT]
  float* accs = p + kT;        // [G][kDv]
  float* ms = accs + G * kDv;  // [G]
  float* ss = ms + G;          // [G]
  std::fill(accs, accs + G * kDv, 0.0f);
  std::fill(ms, ms + G, -INFINITY);
  std::fill(ss, ss + G, 0.0f);
  for (int32_t t0 = 0; t0 < n_kv; t0 += kT) {
    const int32_t t1 = std::min(n_kv, t0 + kT), nt = t1 - t0;
    const int ng = (nt + kKeys - 1) / kKeys;
    {
      KvRowWalker walk(kv.k_base, kv.k_row_stride, kv, t0);
      const uint16_t* last = nullptr;
      for (int g = 0; g < ng; ++g) {
        const uint16_t* rows[kKeys];
        for (int j = 0; j < kKeys; ++j) {  // keys past t1 repeat the last one (lanes ignored)
          if (kKeys * g + j < nt)
            last = reinterpret_cast<const uint16_t*>(walk.Next()) + kv.k_head_offset;
          rows[j] = last;
        }
        for (int i0 = 0; i0 < dk; i0 += 8) {
          __m256 r[8];
          for (int j = 0; j < kKeys; ++j) r[j] = LoadHalf8(rows[j] + i0);
          Transpose8(r);
          for (int i = 0; i < 8; ++i) _mm256_store_ps(kt + (i0 + i) * kT + kKeys * g, r[i]);
        }
      }
      KvRowWalker vwalk(kv.v_base, kv.v_row_stride, kv, t0);
      for (int32_t j = 0; j < nt; ++j) {
        const uint16_t* vr = reinterpret_cast<const uint16_t*>(vwalk.Next()) + kv.v_head_offset;
        for (int i = 0; i < kRegs; ++i)
          _mm256_store_ps(vf + j * kDv + 8 * i, LoadHalf8(vr + 8 * i));
      }
    }
    for (int h = 0; h < G; ++h) {
      const float* qh = q + h * q_stride;
      // Scores: up to 8 key groups' FMA chains interleaved (as DotsFmaF16, same per-lane order).
      __m256 d[kGroups];
      for (int g = 0; g < kGroups; ++g) d[g] = _mm256_setzero_ps();
      for (int i = 0; i < dk; ++i) {
        const __m256 qi = _mm256_set1_ps(qh[i]);
        const float* ki = kt + i * kT;
        for (int g = 0; g < kGroups; ++g) {
          if (g < ng) d[g] = _mm256_fmadd_ps(qi, _mm256_load_ps(ki + kKeys * g), d[g]);
        }
      }
      alignas(32) float dots[kT];
      for (int g = 0; g < kGroups; ++g) _mm256_store_ps(dots + kKeys * g, d[g]);
      float tile_max = -INFINITY;
      for (int32_t j = 0; j < nt; ++j) {
        p[j] = dots[j] * scale;
        tile_max = std::max(tile_max, p[j]);
      }
      float* acch = accs + h * kDv;
      __m256 acc[kRegs];
      for (int i = 0; i < kRegs; ++i) acc[i] = _mm256_loadu_ps(acch + 8 * i);
      float m = ms[h], s = ss[h];
      const float m_new = std::max(m, tile_max);
      if (m_new > m && m != -INFINITY) {
        const float sc = std::exp(m - m_new);
        const __m256 vsc = _mm256_set1_ps(sc);
        for (int i = 0; i < kRegs; ++i) acc[i] = _mm256_mul_ps(acc[i], vsc);
        s *= sc;
      }
      m = m_new;
      double tile_sum = 0.0;
      for (int32_t j = 0; j < nt; ++j) {
        p[j] = std::exp(p[j] - m);
        tile_sum += p[j];
      }
      s = static_cast<float>(static_cast<double>(s) + tile_sum);
      for (int32_t j = 0; j < nt; ++j) {
        const __m256 w = _mm256_set1_ps(p[j]);
        for (int i = 0; i < kRegs; ++i)
          acc[i] = _mm256_fmadd_ps(w, _mm256_load_ps(vf + j * kDv + 8 * i), acc[i]);
      }
      for (int i = 0; i < kRegs; ++i) _mm256_storeu_ps(acch + 8 * i, acc[i]);
      ms[h] = m;
      ss[h] = s;
    }
  }
  for (int h = 0; h < G; ++h) {
    const float inv = ss[h] > 0 ? 1.0f / ss[h] : 0.0f;
    for (int i = 0; i < kDv; ++i) out[h * out_stride + i] = accs[h * kDv + i] * inv;
  }
}

// F16 cache, tiled numerics (the reference's AttendF16Tiled).
SHOAL_AVX2 void AttendF16Tiled(const float* q, int dk, int dv, float scale, const PagedKv& kv,
                               int32_t n_kv, float* out, float* scratch) {
  float* acc = scratch;     // [dv]
  float* p = scratch + dv;  // [kAttnTile]
  std::fill(acc, acc + dv, 0.0f);
  float m = -INFINITY, s = 0.0f;
  alignas(32) float dots[kKeys];
  for (int32_t t0 = 0; t0 < n_kv; t0 += kAttnTile) {
    const int32_t t1 = std::min(n_kv, t0 + kAttnTile);
    float tile_max = -INFINITY;
    for (int32_t j0 = t0; j0 < t1; j0 += kKeys) {
      Dots8<Sum::kFma, true>(q, dk, kv, j0, n_kv, dots);
      const int32_t j1 = std::min(t1, j0 + kKeys);
      for (int32_t j = j0; j < j1; ++j) {
        p[j - t0] = dots[j - j0] * scale;
        tile_max = std::max(tile_max, p[j - t0]);
      }
    }
    const float m_new = std::max(m, tile_max);
    if (m_new > m && m != -INFINITY) {
      const float ms = std::exp(m - m_new);
      const __m256 vms = _mm256_set1_ps(ms);
      for (int i = 0; i < dv; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), vms));
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
      const __m256 w = _mm256_set1_ps(p[j - t0]);
      for (int i = 0; i < dv; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(w, LoadHalf8(vr + i), _mm256_loadu_ps(acc + i)));
    }
  }
  const float inv = s > 0 ? 1.0f / s : 0.0f;
  for (int i = 0; i < dv; ++i) out[i] = acc[i] * inv;
}

bool CpuHasAvx2F16c() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __builtin_cpu_supports("f16c");
  return ok;
}

}  // namespace

bool AttendOneHeadAvx2(const float* q, int dk, int dv, float scale, const PagedKv& kv, int32_t n_kv,
                       float* out, float* scratch, bool tiled) {
  if (!CpuHasAvx2F16c() || dk % 8 != 0 || dv % 8 != 0 || dk > 1024 || dv > 1024 || n_kv <= 0)
    return false;
  if (kv.dtype == DType::kF16) {
    if (tiled && dv == 64) {
      AttendF16TiledFixed<64>(q, dk, scale, kv, n_kv, out, scratch);
    } else if (tiled && dv == 128) {
      AttendF16TiledFixed<128>(q, dk, scale, kv, n_kv, out, scratch);
    } else if (tiled) {
      AttendF16Tiled(q, dk, dv, scale, kv, n_kv, out, scratch);
    } else {
      AttendF16(q, dk, dv, scale, kv, n_kv, out, scratch);
    }
  } else {
    AttendF32(q, dk, dv, scale, kv, n_kv, out, scratch);
  }
  return true;
}

bool AttendHeadsTiledAvx2(const float* q, int64_t q_stride, int n_heads, int dk, int dv,
                          float scale, const PagedKv& kv, int32_t n_kv, float* out,
                          int64_t out_stride, float* scratch) {
  if (!CpuHasAvx2F16c() || dk % 8 != 0 || dk > 1024 || n_kv <= 0 || kv.dtype != DType::kF16)
    return false;
  if (dv == 64) {
    AttendF16TiledHeads<64>(q, q_stride, n_heads, dk, scale, kv, n_kv, out, out_stride, scratch);
  } else if (dv == 128) {
    AttendF16TiledHeads<128>(q, q_stride, n_heads, dk, scale, kv, n_kv, out, out_stride, scratch);
  } else {
    return false;
  }
  return true;
}

#else

bool AttendHeadsTiledAvx2(const float*, int64_t, int, int, int, float, const PagedKv&, int32_t,
                          float*, int64_t, float*) {
  return false;
}

bool AttendOneHeadAvx2(const float*, int, int, float, const PagedKv&, int32_t, float*, float*,
                       bool) {
  return false;
}

#endif

}  // namespace shoal::kernels::internal
