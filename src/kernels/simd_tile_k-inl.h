// Register-tiled Q4_K and Q6_K (x Q8_K) kernels of simd_tile.cc (layouts in simd_tile.h), AVX-512
// VNNI. Per group of 8 super-blocks and (row, token): exact int32 sums of each 32-element unit
// (both 16-element halves, lanes k and k + 8) by dpbusd, times the unit's scale by mullo,
// the min / offset terms by dpwssd on int16 pairs, halves folded (exact integers), then the
// single-row kernel's float expression per super-block into its canonical lane (super-block b
// into lane b % 8), so every output has the bits of DotQ4_K / DotQ6_K.
// Included by simd_tile.cc once per target.

#if defined(SHOAL_KERNELS_SIMD_TILE_K_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SHOAL_KERNELS_SIMD_TILE_K_INL_H_
#undef SHOAL_KERNELS_SIMD_TILE_K_INL_H_
#else
#define SHOAL_KERNELS_SIMD_TILE_K_INL_H_
#endif

#include <immintrin.h>

#include "hwy/highway.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_tile.h"

#if HWY_TARGET == HWY_AVX3_DL
HWY_BEFORE_NAMESPACE();
#pragma GCC target("avx512vnni,no-avxvnni")
namespace shoal::kernels::HWY_NAMESPACE {
namespace tile {

using internal::kActKGroupBytes;
using internal::kQKK;
using internal::kTileSuperBlocks;

// Lanes k and k + 8 for super-blocks k < rem of the group.
HWY_INLINE __mmask16 HalvesBelow(int64_t rem) {
  const unsigned m8 = rem >= 8 ? 0xFFu : (1u << rem) - 1;
  return static_cast<__mmask16>(m8 | (m8 << 8));
}

// Lane k + 8h: the dword at base + k * stride + off + 16 h (masked lanes: 0).
HWY_INLINE __m512i GatherHalves4(const uint8_t* base, int stride, int off, __mmask16 m) {
  const __m512i k = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i h = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16, 16);
  const __m512i idx =
      _mm512_add_epi32(_mm512_add_epi32(_mm512_mullo_epi32(k, _mm512_set1_epi32(stride)), h),
                       _mm512_set1_epi32(off));
  return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, base, 1);
}

// The int16 pair at base + k * stride + off as int32 lanes: the low int16 in lanes k < 8, the
// high one in lanes k + 8 (never reads past the pair).
HWY_INLINE __m512i GatherI16(const uint8_t* base, int stride, int off, __mmask16 m) {
  const __m512i k = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i idx =
      _mm512_add_epi32(_mm512_mullo_epi32(k, _mm512_set1_epi32(stride)), _mm512_set1_epi32(off));
  const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, base, 1);
  const __m512i lo = _mm512_srai_epi32(_mm512_slli_epi32(v, 16), 16);
  return _mm512_mask_blend_epi32(0xFF00, lo, _mm512_srai_epi32(v, 16));
}

// Two int32 lane vectors of int16 values -> (lo, hi) int16 pairs per lane.
HWY_INLINE __m512i PairI16(__m512i lo, __m512i hi) {
  return _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xFFFF)),
                         _mm512_slli_epi32(hi, 16));
}

void PackActK(const uint8_t* xq, int64_t n, uint8_t* dst) {
  namespace q8k = internal::q8_k;
  constexpr int kX = q8k::kBytes;
  const int64_t nsb = n / kQKK;
  for (int64_t b0 = 0; b0 < nsb; b0 += kTileSuperBlocks, dst += kActKGroupBytes) {
    const uint8_t* base = xq + b0 * kX;
    const __mmask16 m = HalvesBelow(nsb - b0);
    for (int p = 0; p < 8; ++p)
      for (int st = 0; st < 4; ++st)
        _mm512_storeu_si512(dst + 64 * (4 * p + st),
                            GatherHalves4(base, kX, q8k::kQs + 32 * p + 4 * st, m));
    for (int i = 0; i < 4; ++i) {
      const __m512i lo = GatherI16(base, kX, q8k::kBsums + 2 * (4 * i), m);      // 4i + h
      const __m512i hi = GatherI16(base, kX, q8k::kBsums + 2 * (4 * i + 2), m);  // 4i + 2 + h
      _mm512_storeu_si512(dst + 2048 + 64 * i, PairI16(lo, hi));
    }
    float d[16] = {};
    for (int k = 0; k < 8 && b0 + k < nsb; ++k) d[k] = internal::LoadF32(base + k * kX + q8k::kD);
    std::memcpy(dst + 2048 + 256, d, sizeof(d));
  }
}

// Per-row, per-group sections of a K-quant 4-row group (F::kRowQs quant bytes per row).
template <int kRowQs>
struct KLayout {
  static constexpr int kScOff = internal::kTileRows * kRowQs;          // 8 x 64 per row
  static constexpr int kPairOff = kScOff + internal::kTileRows * 512;  // 4 x 64 per row
  static constexpr int kDOff = kPairOff + internal::kTileRows * 256;   // 16 f32 per row
  static constexpr int kGroupBytes = kDOff + internal::kTileRows * 64;
};

// Scales, int16 pairs and d / dmin of one row and group, from per-super-block unpacked arrays.
template <class L>
void StoreKScales(int r, const int32_t (&sc)[8][16], const int32_t (&pair_lo)[4][16],
                  const int32_t (&pair_hi)[4][16], const float (&d)[16], uint8_t* dst) {
  for (int p = 0; p < 8; ++p)
    _mm512_storeu_si512(dst + L::kScOff + 512 * r + 64 * p, _mm512_loadu_si512(sc[p]));
  for (int i = 0; i < 4; ++i)
    _mm512_storeu_si512(dst + L::kPairOff + 256 * r + 64 * i,
                        PairI16(_mm512_loadu_si512(pair_lo[i]), _mm512_loadu_si512(pair_hi[i])));
  std::memcpy(dst + L::kDOff + 64 * r, d, sizeof(d));
}

void RepackQ4_K(const uint8_t* w, uint64_t row_bytes, int rows, int64_t n, uint8_t* dst) {
  namespace q4k = internal::q4_k;
  constexpr int kW = q4k::kBytes;
  using L = KLayout<1024>;
  const int64_t nsb = n / kQKK;
  for (int64_t b0 = 0; b0 < nsb; b0 += kTileSuperBlocks, dst += L::kGroupBytes) {
    const int nk = static_cast<int>(std::min<int64_t>(8, nsb - b0));
    for (int r = 0; r < internal::kTileRows; ++r) {
      const uint8_t* base = w + r * row_bytes + b0 * kW;
      const __mmask16 m = r < rows ? HalvesBelow(nk) : __mmask16{0};
      // Step (a, st): qs bytes 32a + 16h + 4st..+3: unit 2a in the low nibbles, 2a + 1 high.
      for (int a = 0; a < 4; ++a)
        for (int st = 0; st < 4; ++st)
          _mm512_storeu_si512(dst + 1024 * r + 64 * (4 * a + st),
                              GatherHalves4(base, kW, q4k::kQs + 32 * a + 4 * st, m));
      int32_t sc[8][16] = {}, lo[4][16] = {}, hi[4][16] = {};
      float d[16] = {};
      for (int k = 0; r < rows && k < nk; ++k) {
        const uint8_t* bw = base + k * kW;
        uint8_t s[8], mn[8];
        for (int j = 0; j < 8; ++j) internal::ScaleMinK4(j, bw + q4k::kScales, &s[j], &mn[j]);
        for (int p = 0; p < 8; ++p) sc[p][k] = sc[p][k + 8] = s[p];
        for (int i = 0; i < 4; ++i) {
          lo[i][k] = lo[i][k + 8] = mn[2 * i];
          hi[i][k] = hi[i][k + 8] = mn[2 * i + 1];
        }
        d[k] = internal::LoadHalf(bw + q4k::kD);
        d[k + 8] = internal::LoadHalf(bw + q4k::kDmin);
      }
      StoreKScales<L>(r, sc, lo, hi, d, dst);
    }
  }
}

void RepackQ6_K(const uint8_t* w, uint64_t row_bytes, int rows, int64_t n, uint8_t* dst) {
  namespace q6k = internal::q6_k;
  constexpr int kW = q6k::kBytes;
  using L = KLayout<2048>;
  const int64_t nsb = n / kQKK;
  const __m512i m4 = _mm512_set1_epi32(0x0F0F0F0F), m2 = _mm512_set1_epi32(0x03030303);
  for (int64_t b0 = 0; b0 < nsb; b0 += kTileSuperBlocks, dst += L::kGroupBytes) {
    const int nk = static_cast<int>(std::min<int64_t>(8, nsb - b0));
    for (int r = 0; r < internal::kTileRows; ++r) {
      const uint8_t* base = w + r * row_bytes + b0 * kW;
      const __mmask16 m = r < rows ? HalvesBelow(nk) : __mmask16{0};
      // Unit p = 4H + K: elements 128H + 32K + l, l = 16h + 4st + i: ql[64H + 32(K % 2) + l]
      // nibble K / 2, qh[32H + l] bits 2K, 2K + 1.
      for (int H = 0; H < 2; ++H) {
        for (int st = 0; st < 4; ++st) {
          const __m512i qh = GatherHalves4(base, kW, q6k::kQh + 32 * H + 4 * st, m);
          for (int K = 0; K < 4; ++K) {
            const __m512i ql =
                GatherHalves4(base, kW, q6k::kQl + 64 * H + 32 * (K % 2) + 4 * st, m);
            const __m512i lo4 = _mm512_and_si512(_mm512_srli_epi32(ql, 4 * (K / 2)), m4);
            const __m512i hi2 = _mm512_and_si512(_mm512_srli_epi32(qh, 2 * K), m2);
            const __m512i q = _mm512_or_si512(lo4, _mm512_slli_epi32(hi2, 4));
            _mm512_storeu_si512(dst + 2048 * r + 64 * (4 * (4 * H + K) + st), q);
          }
        }
      }
      int32_t sc[8][16] = {}, lo[4][16] = {}, hi[4][16] = {};
      float d[16] = {};
      for (int k = 0; r < rows && k < nk; ++k) {
        const uint8_t* bw = base + k * kW;
        const int8_t* s = reinterpret_cast<const int8_t*>(bw + q6k::kScales);
        for (int p = 0; p < 8; ++p) {
          sc[p][k] = s[2 * p];
          sc[p][k + 8] = s[2 * p + 1];
        }
        for (int i = 0; i < 4; ++i) {
          for (int h = 0; h < 2; ++h) {
            lo[i][k + 8 * h] = s[4 * i + h];
            hi[i][k + 8 * h] = s[4 * i + 2 + h];
          }
        }
        d[k] = internal::LoadHalf(bw + q6k::kD);
      }
      StoreKScales<L>(r, sc, lo, hi, d, dst);
    }
  }
}

struct Q4_K {
  static constexpr int kRowQs = 1024;
  static constexpr bool kHasMin = true;
  // A half unit's sum is at most 16 * 15 * 128 = 30720 in magnitude: it fits int16.
  static constexpr bool kSumsFitI16 = true;
  template <int P, int St>
  static __m512i Step(const uint8_t* row) {
    const __m512i c = _mm512_loadu_si512(row + 64 * (4 * (P / 2) + St));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    return P % 2 == 0 ? _mm512_and_si512(c, m4) : _mm512_and_si512(_mm512_srli_epi16(c, 4), m4);
  }
};

struct Q6_K {
  static constexpr int kRowQs = 2048;
  static constexpr bool kHasMin = false;
  static constexpr bool kSumsFitI16 = false;  // up to 16 * 63 * 128 = 129024
  template <int P, int St>
  static __m512i Step(const uint8_t* row) {
    return _mm512_loadu_si512(row + 64 * (4 * P + St));
  }
};

// Units P..7: S = exact unit sums over 4 steps; P += S * scale (per row and unit).
template <class F, class L, int P, int T>
HWY_INLINE void KUnits(const uint8_t* wg, const uint8_t* const* xg,
                       __m512i (&acc)[internal::kTileRows][T]) {
  if constexpr (P < 8) {
    __m512i s[internal::kTileRows][T];
    for (int r = 0; r < internal::kTileRows; ++r)
      for (int t = 0; t < T; ++t) s[r][t] = _mm512_setzero_si512();
    [&]<int... St>(std::integer_sequence<int, St...>) {
      (([&] {
         __m512i x[T];
         for (int t = 0; t < T; ++t) x[t] = _mm512_loadu_si512(xg[t] + 64 * (4 * P + St));
         for (int r = 0; r < internal::kTileRows; ++r) {
           const __m512i w = F::template Step<P, St>(wg + r * F::kRowQs);
           for (int t = 0; t < T; ++t) s[r][t] = _mm512_dpbusd_epi32(s[r][t], w, x[t]);
         }
       }()),
       ...);
    }
    (std::make_integer_sequence<int, 4>{});
    for (int r = 0; r < internal::kTileRows; ++r) {
      const __m512i sc = _mm512_loadu_si512(wg + L::kScOff + 512 * r + 64 * P);
      for (int t = 0; t < T; ++t) {
        if constexpr (F::kSumsFitI16) {
          // s and sc both fit the low int16 of each lane (sc's high half is 0), so one dpwssd
          // is s * sc + 0: a third fewer cycles than mullo + add (vpmulld zmm is 2 uops on Zen 4).
          acc[r][t] = _mm512_dpwssd_epi32(acc[r][t], s[r][t], sc);
        } else {
          acc[r][t] = _mm512_add_epi32(acc[r][t], _mm512_mullo_epi32(s[r][t], sc));
        }
      }
    }
    KUnits<F, L, P + 1, T>(wg, xg, acc);
  }
}

HWY_INLINE __m256i FoldHalves(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// 4 rows x T tokens (T <= 2: 2 x 8 x 2 zmm accumulators stay in registers).
template <class F, int T>
void DotK(const uint8_t* wp, const uint8_t* const* x, int64_t n, float* out) {
  using L = KLayout<F::kRowQs>;
  constexpr int R = internal::kTileRows;
  const int64_t nsb = n / kQKK;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  int64_t g = 0;
  for (int64_t b0 = 0; b0 < nsb; b0 += kTileSuperBlocks, ++g) {
    const uint8_t* wg = wp + g * L::kGroupBytes;
    const uint8_t* xg[T];
    for (int t = 0; t < T; ++t) xg[t] = x[t] + g * kActKGroupBytes;
    // Pair terms: Q4_K sum_p m_p bsum_p (kept apart), Q6_K sum_j sc_j bsum_j (times -32 into isum).
    auto pair_terms = [&](int r, int t) {
      __m512i v = _mm512_setzero_si512();
      for (int i = 0; i < 4; ++i)
        v = _mm512_dpwssd_epi32(v, _mm512_loadu_si512(wg + L::kPairOff + 256 * r + 64 * i),
                                _mm512_loadu_si512(xg[t] + 2048 + 64 * i));
      return v;
    };
    __m512i ia[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) {
        ia[r][t] = F::kHasMin ? _mm512_setzero_si512()
                              : _mm512_sub_epi32(_mm512_setzero_si512(),
                                                 _mm512_slli_epi32(pair_terms(r, t), 5));
      }
    }
    KUnits<F, L, 0, T>(wg, xg, ia);
    const int64_t rem = nsb - b0;
    const __mmask8 m = rem >= 8 ? 0xFF : static_cast<__mmask8>((1u << rem) - 1);
    for (int r = 0; r < R; ++r) {
      const __m256 dw = _mm256_loadu_ps(reinterpret_cast<const float*>(wg + L::kDOff + 64 * r));
      const __m256 dmw =
          _mm256_loadu_ps(reinterpret_cast<const float*>(wg + L::kDOff + 64 * r + 32));
      for (int t = 0; t < T; ++t) {
        const __m256 yd = _mm256_loadu_ps(reinterpret_cast<const float*>(xg[t] + 2048 + 256));
        const __m256 fi = _mm256_cvtepi32_ps(FoldHalves(ia[r][t]));
        __m256 v;
        if constexpr (F::kHasMin) {
          // d * isum - dmin * summ with d = yd * d_w, dmin = yd * dmin_w (DotQ4_KN).
          const __m256 fs = _mm256_cvtepi32_ps(FoldHalves(pair_terms(r, t)));
          v = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(yd, dw), fi),
                            _mm256_mul_ps(_mm256_mul_ps(yd, dmw), fs));
        } else {
          v = _mm256_mul_ps(_mm256_mul_ps(dw, yd), fi);  // (d_w * d_x) * isum (DotQ6_KN)
        }
        acc[r][t] = _mm256_mask_add_ps(acc[r][t], m, acc[r][t], v);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      alignas(32) float lanes[internal::kBlockLanes];
      _mm256_store_ps(lanes, acc[r][t]);
      out[t * R + r] = internal::SumBlockLanes(lanes);
    }
  }
}

// 3 and 4 tokens as two calls (the accumulators of 4 x 4 would not fit the 32 registers).
template <class F, int T>
void DotKSplit(const uint8_t* wp, const uint8_t* const* x, int64_t n, float* out) {
  DotK<F, 2>(wp, x, n, out);
  DotK<F, T - 2>(wp, x + 2, n, out + 2 * internal::kTileRows);
}

void SetKQuantKernels(internal::TileKernels* k) {
  auto set = [](internal::TileType* tt, int group_bytes, internal::TileRepackFn repack) {
    tt->group_elems = kTileSuperBlocks * kQKK;
    tt->act_group_bytes = kActKGroupBytes;
    tt->weight_group_bytes = group_bytes;
    tt->pack_act = &PackActK;
    tt->repack = repack;
  };
  set(&k->q4_k, KLayout<Q4_K::kRowQs>::kGroupBytes, &RepackQ4_K);
  k->q4_k.dot[0] = &DotK<Q4_K, 1>;
  k->q4_k.dot[1] = &DotK<Q4_K, 2>;
  k->q4_k.dot[2] = &DotKSplit<Q4_K, 3>;
  k->q4_k.dot[3] = &DotKSplit<Q4_K, 4>;
  set(&k->q6_k, KLayout<Q6_K::kRowQs>::kGroupBytes, &RepackQ6_K);
  k->q6_k.dot[0] = &DotK<Q6_K, 1>;
  k->q6_k.dot[1] = &DotK<Q6_K, 2>;
  k->q6_k.dot[2] = &DotKSplit<Q6_K, 3>;
  k->q6_k.dot[3] = &DotKSplit<Q6_K, 4>;
}

}  // namespace tile
}  // namespace shoal::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET == HWY_AVX3_DL

#endif  // include guard toggle
