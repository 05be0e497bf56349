// Highway dynamic-dispatch unit of the register-tiled matmul kernels (simd_tile.h): AVX-512 VNNI
// intrinsics on the AVX3_DL target, nothing elsewhere (MatMul then keeps its per-row kernels).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL  // opt-in in Highway 1.0, as in simd.cc
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd_tile.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_tile.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC target("avx512vnni,no-avxvnni")  // as in simd_x86-inl.h
#endif
namespace shoal::kernels::HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3_DL
namespace tile {

using internal::kActGroupBytes;
using internal::kTileBlocks;
using internal::kTileRows;
using internal::kTileSteps;

// Lane k < rem of a 16-lane mask (rem = blocks left in the last group).
HWY_INLINE __mmask16 LanesBelow(int64_t rem) {
  return rem >= kTileBlocks ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << rem) - 1);
}

// Block k's byte offset `off` + [0, 4) as lane k, blocks `stride` bytes apart (masked lanes: 0).
HWY_INLINE __m512i Gather4(const uint8_t* base, int stride, int off, __mmask16 m) {
  const __m512i idx = _mm512_add_epi32(
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(stride)),
      _mm512_set1_epi32(off));
  return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, base, 1);
}

// The fp16 at offset 0 of 16 blocks as 16 exact floats.
HWY_INLINE __m512 GatherHalves(const uint8_t* base, int stride, __mmask16 m) {
  const __m512i words = Gather4(base, stride, 0, m);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_and_si512(words, _mm512_set1_epi32(0xFFFF))));
}

void PackAct(const uint8_t* xq, int64_t n, uint8_t* dst) {
  constexpr int kX = internal::q8_0::kBytes;
  const int64_t nb = n / internal::kQK;
  for (int64_t b0 = 0; b0 < nb; b0 += kTileBlocks, dst += kActGroupBytes) {
    const uint8_t* base = xq + b0 * kX;
    const __mmask16 m = LanesBelow(nb - b0);
    __m512i sum = _mm512_setzero_si512();
    for (int s = 0; s < kTileSteps; ++s) {
      const __m512i q = Gather4(base, kX, internal::q8_0::kQs + internal::TileElem(s), m);
      _mm512_storeu_si512(dst + 64 * s, q);
      sum = _mm512_dpbusd_epi32(sum, _mm512_set1_epi8(1), q);
    }
    _mm512_storeu_ps(dst + 512, GatherHalves(base + internal::q8_0::kD, kX, m));
    _mm512_storeu_si512(dst + 576, sum);
  }
}

// The 16-byte fields at p, p + stride, ... of 16 blocks as 4 zmm: chunk c holds in lane k the
// dword c of block k. 4 loads, 12 inserts, 8 two-source permutes and 4 blends: faster than the
// 4 dword gathers it replaces (6% of Q4_0 prefill).
HWY_INLINE void TransposeQs16(const uint8_t* p, int stride, uint8_t* dst) {
  __m512i z[4];  // z[j]: blocks 4j..4j+3, one per 128-bit lane
  for (int j = 0; j < 4; ++j) {
    const uint8_t* q = p + 4 * j * stride;
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + stride)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2 * stride)), 2);
    z[j] =
        _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 3 * stride)), 3);
  }
  for (int c = 0; c < 4; ++c) {
    // Lanes 0..7: dword c of z[0]'s then z[1]'s 4 blocks (index 16 + i picks the second source);
    // lanes 8..15 the same from z[2], z[3].
    const __m512i idx = _mm512_setr_epi32(c, 4 + c, 8 + c, 12 + c, 16 + c, 20 + c, 24 + c, 28 + c,
                                          c, 4 + c, 8 + c, 12 + c, 16 + c, 20 + c, 24 + c, 28 + c);
    const __m512i lo = _mm512_permutex2var_epi32(z[0], idx, z[1]);
    const __m512i hi = _mm512_permutex2var_epi32(z[2], idx, z[3]);
    _mm512_storeu_si512(dst + 64 * c, _mm512_mask_blend_epi32(0xFF00, lo, hi));
  }
}

// The fp16 at offset 0 of 16 blocks, as they are (16 x fp16, masked lanes 0).
HWY_INLINE __m256i GatherHalfBits(const uint8_t* base, int stride, __mmask16 m) {
  return _mm512_cvtepi32_epi16(Gather4(base, stride, 0, m));
}

// Q4_0: chunk c = qs bytes 4c..4c+3 of each block (low nibbles: step 2c, high: step 2c + 1);
// scales kept as fp16, so a panel has the bytes of the rows it came from.
void RepackQ4_0(const uint8_t* w, uint64_t row_bytes, int rows, int64_t n, uint8_t* dst) {
  constexpr int kW = internal::q4_0::kBytes;
  const int64_t nb = n / internal::kQK;
  constexpr int kRowQs = 256;
  for (int64_t b0 = 0; b0 < nb; b0 += kTileBlocks, dst += kTileRows * (kRowQs + 32)) {
    const __mmask16 m = LanesBelow(nb - b0);
    for (int r = 0; r < kTileRows; ++r) {
      const uint8_t* base = w + r * row_bytes + b0 * kW;
      const __mmask16 mr = r < rows ? m : __mmask16{0};
      if (mr == 0xFFFF) {
        TransposeQs16(base + internal::q4_0::kQs, kW, dst + r * kRowQs);
      } else {
        for (int c = 0; c < 4; ++c)
          _mm512_storeu_si512(dst + r * kRowQs + 64 * c,
                              Gather4(base, kW, internal::q4_0::kQs + 4 * c, mr));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + kTileRows * kRowQs + 32 * r),
                          GatherHalfBits(base + internal::q4_0::kD, kW, mr));
    }
  }
}

// Q8_0: step s = the quants at element TileElem(s), stored as q + 128 (unsigned for dpbusd).
void RepackQ8_0(const uint8_t* w, uint64_t row_bytes, int rows, int64_t n, uint8_t* dst) {
  constexpr int kW = internal::q8_0::kBytes;
  const int64_t nb = n / internal::kQK;
  constexpr int kRowQs = 512;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b0 = 0; b0 < nb; b0 += kTileBlocks, dst += kTileRows * (kRowQs + 64)) {
    const __mmask16 m = LanesBelow(nb - b0);
    for (int r = 0; r < kTileRows; ++r) {
      const uint8_t* base = w + r * row_bytes + b0 * kW;
      const __mmask16 mr = r < rows ? m : __mmask16{0};
      for (int s = 0; s < kTileSteps; ++s) {
        const __m512i q = Gather4(base, kW, internal::q8_0::kQs + internal::TileElem(s), mr);
        _mm512_storeu_si512(dst + r * kRowQs + 64 * s, _mm512_xor_si512(q, bias));
      }
      _mm512_storeu_ps(dst + kTileRows * kRowQs + 64 * r,
                       GatherHalves(base + internal::q8_0::kD, kW, mr));
    }
  }
}

// Q4_0 weights q in 0..15: sum (q - 8) y = dpbusd(q, y) - 8 * sum y.
struct Q4_0 {
  static constexpr int kRowQs = 256;
  static constexpr int kScaleBytes = 32;  // 16 x fp16 per row and group
  static constexpr int kShift = 3;        // the offset 8 as a shift of the quant sum
  static __m512 Scales(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  template <int S>
  static __m512i Step(const uint8_t* row) {
    const __m512i c = _mm512_loadu_si512(row + 64 * (S / 2));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    return S % 2 == 0 ? _mm512_and_si512(c, m4) : _mm512_and_si512(_mm512_srli_epi16(c, 4), m4);
  }
};

// Q8_0 weights stored as q + 128: sum q y = dpbusd(q + 128, y) - 128 * sum y.
struct Q8_0 {
  static constexpr int kRowQs = 512;
  static constexpr int kScaleBytes = 64;  // 16 x f32 per row and group
  static constexpr int kShift = 7;
  static __m512 Scales(const uint8_t* p) { return _mm512_loadu_ps(p); }
  template <int S>
  static __m512i Step(const uint8_t* row) {
    return _mm512_loadu_si512(row + 64 * S);
  }
};

template <class F, int S, int T>
HWY_INLINE void Steps(const uint8_t* wg, const uint8_t* const* xg, __m512i (&ia)[kTileRows][T]) {
  if constexpr (S < kTileSteps) {
    __m512i x[T];
    for (int t = 0; t < T; ++t) x[t] = _mm512_loadu_si512(xg[t] + 64 * S);
    for (int r = 0; r < kTileRows; ++r) {
      const __m512i w = F::template Step<S>(wg + r * F::kRowQs);
      for (int t = 0; t < T; ++t) ia[r][t] = _mm512_dpbusd_epi32(ia[r][t], w, x[t]);
    }
    Steps<F, S + 1, T>(wg, xg, ia);
  }
}

// 4 rows x T tokens. Per group: exact block integers in 16 lanes, then per (row, token) the
// reference's (d_w * d_x) * isum, blocks 16g..16g+7 then 16g+8..16g+15 into the 8 canonical
// lanes (block b into lane b % 8, in block order), then the canonical lane sum. Tokens 2u and
// 2u + 1 share one zmm of canonical lanes (0..7 and 8..15): per group two 128-bit shuffles and
// two adds serve both instead of two extracts and four ymm adds, and the 8 zmm accumulators
// fit the registers beside the 16 integer ones.
template <class F, int T>
void Dot(const uint8_t* wp, const uint8_t* const* x, int64_t n, float* out) {
  const int64_t nb = n / internal::kQK;
  constexpr int kGroupBytes = kTileRows * (F::kRowQs + F::kScaleBytes);
  constexpr int kPairs = (T + 1) / 2;
  __m512 acc[kTileRows][kPairs];
  for (int r = 0; r < kTileRows; ++r)
    for (int u = 0; u < kPairs; ++u) acc[r][u] = _mm512_setzero_ps();
  int64_t g = 0;
  for (int64_t b0 = 0; b0 < nb; b0 += kTileBlocks, ++g) {
    const uint8_t* wg = wp + g * kGroupBytes;
    const uint8_t* xg[T];
    for (int t = 0; t < T; ++t) xg[t] = x[t] + g * kActGroupBytes;
    __m512i ia[kTileRows][T];
    for (int t = 0; t < T; ++t) {
      const __m512i sum = _mm512_loadu_si512(xg[t] + 576);
      const __m512i off =
          _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, F::kShift));
      for (int r = 0; r < kTileRows; ++r) ia[r][t] = off;
    }
    Steps<F, 0, T>(wg, xg, ia);
    const int64_t rem = nb - b0;
    const unsigned m_lo = rem >= 8 ? 0xFFu : (1u << rem) - 1;
    const unsigned m_hi = rem >= 16 ? 0xFFu : rem <= 8 ? 0u : (1u << (rem - 8)) - 1;
    const __mmask16 k_lo = static_cast<__mmask16>(m_lo | (m_lo << 8));
    const __mmask16 k_hi = static_cast<__mmask16>(m_hi | (m_hi << 8));
    __m512 dx[T];
    for (int t = 0; t < T; ++t) dx[t] = _mm512_loadu_ps(xg[t] + 512);
    for (int r = 0; r < kTileRows; ++r) {
      const __m512 dw = F::Scales(wg + kTileRows * F::kRowQs + F::kScaleBytes * r);
      for (int u = 0; u < kPairs; ++u) {
        const __m512 v0 =
            _mm512_mul_ps(_mm512_mul_ps(dw, dx[2 * u]), _mm512_cvtepi32_ps(ia[r][2 * u]));
        const __m512 v1 = 2 * u + 1 < T ? _mm512_mul_ps(_mm512_mul_ps(dw, dx[2 * u + 1]),
                                                        _mm512_cvtepi32_ps(ia[r][2 * u + 1]))
                                        : _mm512_setzero_ps();
        // lo: blocks 0..7 of both tokens; hi: blocks 8..15 (128-bit lanes 0,1 / 2,3 of each).
        const __m512 lo = _mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 hi = _mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(3, 2, 3, 2));
        acc[r][u] = _mm512_mask_add_ps(acc[r][u], k_lo, acc[r][u], lo);
        acc[r][u] = _mm512_mask_add_ps(acc[r][u], k_hi, acc[r][u], hi);
      }
    }
  }
  for (int r = 0; r < kTileRows; ++r) {
    for (int u = 0; u < kPairs; ++u) {
      alignas(64) float lanes[2 * internal::kBlockLanes];
      _mm512_store_ps(lanes, acc[r][u]);
      out[2 * u * kTileRows + r] = internal::SumBlockLanes(lanes);
      if (2 * u + 1 < T) out[(2 * u + 1) * kTileRows + r] = internal::SumBlockLanes(lanes + 8);
    }
  }
}

}  // namespace tile
#endif  // HWY_TARGET == HWY_AVX3_DL

}  // namespace shoal::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#include "kernels/simd_tile_k-inl.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC target("avx512vnni,no-avxvnni")
#endif
namespace shoal::kernels::HWY_NAMESPACE {

const internal::TileKernels* GetTileKernels() {
  static const internal::TileKernels kernels = [] {
    internal::TileKernels k;
#if HWY_TARGET == HWY_AVX3_DL
    using internal::TileType;
    auto legacy = [](TileType* tt, int row_qs, int scale_bytes, internal::TileRepackFn repack) {
      tt->group_elems = internal::kTileBlocks * internal::kQK;
      tt->act_group_bytes = internal::kActGroupBytes;
      tt->weight_group_bytes = internal::kTileRows * (row_qs + scale_bytes);
      tt->pack_act = &tile::PackAct;
      tt->repack = repack;
    };
    legacy(&k.q4_0, tile::Q4_0::kRowQs, tile::Q4_0::kScaleBytes, &tile::RepackQ4_0);
    k.q4_0.dot[0] = &tile::Dot<tile::Q4_0, 1>;
    k.q4_0.dot[1] = &tile::Dot<tile::Q4_0, 2>;
    k.q4_0.dot[2] = &tile::Dot<tile::Q4_0, 3>;
    k.q4_0.dot[3] = &tile::Dot<tile::Q4_0, 4>;
    legacy(&k.q8_0, tile::Q8_0::kRowQs, tile::Q8_0::kScaleBytes, &tile::RepackQ8_0);
    k.q8_0.dot[0] = &tile::Dot<tile::Q8_0, 1>;
    k.q8_0.dot[1] = &tile::Dot<tile::Q8_0, 2>;
    k.q8_0.dot[2] = &tile::Dot<tile::Q8_0, 3>;
    k.q8_0.dot[3] = &tile::Dot<tile::Q8_0, 4>;
    tile::SetKQuantKernels(&k);
#endif
    return k;
  }();
  return &kernels;
}

}  // namespace shoal::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace shoal::kernels::internal {

HWY_EXPORT(GetTileKernels);

const TileKernels& BestTileKernels() {
  static const TileKernels* best = HWY_DYNAMIC_DISPATCH(GetTileKernels)();
  return *best;
}

const TileType* TileTypeFor(DType t) {
  const TileKernels& k = BestTileKernels();
  const TileType* tt = t == DType::kQ4_0   ? &k.q4_0
                       : t == DType::kQ8_0 ? &k.q8_0
                       : t == DType::kQ4_K ? &k.q4_k
                       : t == DType::kQ6_K ? &k.q6_k
                                           : nullptr;
  return tt != nullptr && tt->pack_act != nullptr ? tt : nullptr;
}

}  // namespace shoal::kernels::internal
#endif  // HWY_ONCE
