// Single-row (decode) dot products on 512-bit registers for the AVX3 and AVX3_DL targets:
// Q4_K and Q6_K x Q8_K, and (AVX3_DL: VBMI + VNNI) Q4_0 x Q8_0 on re-laid-out activations.
// The decode matvec reads every weight once, so these run once per weight byte: 64 weights per
// instruction, the K-quant scales widened by one permute instead of 8-16 scalar inserts, the
// per-block sums and float math of 8 blocks done together in vectors, and exact int32 sums.
// Single-thread L3-resident 2048 x 2048 matvec, Zen 4: Q4_K 6.8 -> 17.2 GB/s, Q6_K 8.2 -> 22.5,
// Q4_0 12-13.6 -> 21.8 (the 256-bit kernels of simd_x86-inl.h before).
// Each returns the bits of its scalar reference (quant_k.cc, quant_legacy.cc): the same integer
// sums per block, the same float expression, the canonical lanes (quant_internal.h).
// Included by simd.cc once per target, after simd_x86-inl.h.

#if defined(SHOAL_KERNELS_SIMD_X86_512_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SHOAL_KERNELS_SIMD_X86_512_INL_H_
#undef SHOAL_KERNELS_SIMD_X86_512_INL_H_
#else
#define SHOAL_KERNELS_SIMD_X86_512_INL_H_
#endif

#include <immintrin.h>

#include <cstring>

#include "hwy/highway.h"
#include "kernels/quant_internal.h"

#undef SHOAL_HAVE_X86_512
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define SHOAL_HAVE_X86_512 1
#else
#define SHOAL_HAVE_X86_512 0
#endif

#if SHOAL_HAVE_X86_512
HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC target("avx512vnni,no-avxvnni")  // EVEX VNNI only (see simd_x86-inl.h)
#endif
namespace shoal::kernels::HWY_NAMESPACE {
namespace x512 {

using internal::kBlockLanes;
using internal::kQK;
using internal::kQKK;

// acc + sum of int16 pair products (a[2i] b[2i] + a[2i+1] b[2i+1]) per int32 lane; exact.
HWY_INLINE __m512i DpWssd(__m512i acc, __m512i a, __m512i b) {
#if HWY_TARGET == HWY_AVX3_DL
  return _mm512_dpwssd_epi32(acc, a, b);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}

// The fp16 at p as a float by F16C (exact, as internal::LoadHalf; the software conversion's
// branches cost more than the rest of a Q4_K super-block's scalar work).
HWY_INLINE float Half(const uint8_t* p) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(internal::LoadU16(p))));
}

// Sum of the 8 int32 lanes of v (exact).
HWY_INLINE int32_t Hsum8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// The 16 int32 lanes of v folded to 8 (exact).
HWY_INLINE __m256i Fold16(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// Q4_K/Q5_K 12 packed scale bytes -> the 8 6-bit scales (low 8 bytes) and 8 6-bit mins (high 8
// bytes), as internal::ScaleMinK4 gives them one at a time. With u0, u1, u2 the three 32-bit
// words: scales 0..3 = u0 & 63, scales 4..7 = (u2 & 15) | (u0 >> 6) << 4, mins 0..3 = u1 & 63,
// mins 4..7 = (u2 >> 4 & 15) | (u1 >> 6) << 4, per byte. In registers: a store of the words and
// a 16-byte reload stalls on store forwarding. Reads 16 bytes (the 12 and 4 bytes of qs).
HWY_INLINE __m128i ScalesMinsK4(const uint8_t* p) {
  const __m128i u = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i a = _mm_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0));  // u0, u2, u1, u2
  const __m128i b = _mm_shuffle_epi32(u, _MM_SHUFFLE(1, 1, 0, 0));  // u0, u0, u1, u1
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i top =
      _mm_and_si128(_mm_srli_epi32(b, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low, top);
}

// Sums of the 8 int32 lanes of a and of b (exact), returned as (a, b).
HWY_INLINE void Hsum8x2(__m256i a, __m256i b, int32_t* sa, int32_t* sb) {
  const __m256i h = _mm256_hadd_epi32(a, b);  // a01 a23 b01 b23 | a45 a67 b45 b67
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  s = _mm_hadd_epi32(s, s);  // a, b, a, b
  *sa = _mm_cvtsi128_si32(s);
  *sb = _mm_extract_epi32(s, 1);
}

// Sums of the 8 int32 lanes of each of v[0..7] (exact), as one vector in that order.
HWY_INLINE __m256i Transpose8Sum(const __m256i* v) {
  const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20),
                          _mm256_permute2x128_si256(q0, q1, 0x31));
}

// Scale-index vectors for permutexvar_epi16 of 16 int16 scales: int16 lane i of vector k takes
// scale 2k (i < 16) or 2k + 1 (i >= 16) for 32-element sub-blocks (Q4_K, Q5_K), or scale
// 4k + i / 8 for 16-element ones (Q2_K, Q3_K, Q6_K): maddubs lane i covers elements 2i, 2i + 1.
HWY_INLINE void ScaleIndex32(__m512i* idx) {
  for (int k = 0; k < 4; ++k)
    idx[k] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(2 * k)),
                                _mm256_set1_epi16(2 * k + 1), 1);
}
HWY_INLINE void ScaleIndex16(__m512i* idx) {
  for (int k = 0; k < 4; ++k) {
    alignas(64) int16_t v[32];
    for (int i = 0; i < 32; ++i) v[i] = static_cast<int16_t>(4 * k + i / 8);
    idx[k] = _mm512_load_si512(v);
  }
}

// Q4_K and Q5_K layouts (same d, dmin and scales; Q5_K adds qh, the fifth bits).
struct Q4KLayout {
  static constexpr int kBytes = internal::q4_k::kBytes, kD = internal::q4_k::kD;
  static constexpr int kScales = internal::q4_k::kScales, kQs = internal::q4_k::kQs;
  static constexpr bool kFifthBit = false;
  static constexpr int kQh = 0;
  static void InitIndex(__m512i* idx) { ScaleIndex32(idx); }
  static void Sums(const uint8_t* bw, const uint8_t* bx, const __m512i* idx, __m256i* is,
                   __m256i* ms);
};
struct Q5KLayout {
  static constexpr int kBytes = internal::q5_k::kBytes, kD = internal::q5_k::kD;
  static constexpr int kScales = internal::q5_k::kScales, kQs = internal::q5_k::kQs;
  static constexpr bool kFifthBit = true;
  static constexpr int kQh = internal::q5_k::kQh;
  static void InitIndex(__m512i* idx) { ScaleIndex32(idx); }
  static void Sums(const uint8_t* bw, const uint8_t* bx, const __m512i* idx, __m256i* is,
                   __m256i* ms);
};
static_assert(internal::q4_k::kDmin == internal::q4_k::kD + 2 &&
              internal::q5_k::kDmin == internal::q5_k::kD + 2);

// q | (bit j of qh[l]) << 4 for the 64 elements of sub-blocks j0 (bytes 0..31: element l) and
// j0 + 1 (bytes 32..63), qh broadcast to both halves. A 64-bit lane shift by s <= 4 left or
// right keeps bit 4 of each byte from the same byte, so one shift and a mask place the bit.
HWY_INLINE __m512i FifthBit(__m512i q, __m512i qh2, int j0) {
  const __m512i m10 = _mm512_set1_epi8(0x10);
  // Sub-block j's bit goes from bit j to bit 4: left by 4 - j (j <= 4) or right by j - 4.
  const auto shift = [&](int lo_j, int hi_j) {
    const __m512i lo = _mm512_set1_epi64(lo_j <= 4 ? 4 - lo_j : 0);
    const __m512i hi = _mm512_set1_epi64(hi_j <= 4 ? 4 - hi_j : 0);
    const __m512i l = _mm512_mask_blend_epi64(0xF0, lo, hi);
    const __m512i rlo = _mm512_set1_epi64(lo_j > 4 ? lo_j - 4 : 0);
    const __m512i rhi = _mm512_set1_epi64(hi_j > 4 ? hi_j - 4 : 0);
    const __m512i r = _mm512_mask_blend_epi64(0xF0, rlo, rhi);
    return _mm512_srlv_epi64(_mm512_sllv_epi64(qh2, l), r);
  };
  return _mm512_or_si512(q, _mm512_and_si512(shift(j0, j0 + 1), m10));
}

// One Q4_K (or Q5_K) super-block against one Q8_K block: the 8 lanes summing to isum = sum_j
// sc_j sum_32 q q8 (maddubs pairs, then dpwssd by the scale) and the 8 lanes summing to summ =
// sum_j m_j (bsum_2j + bsum_2j+1).
template <class L>
HWY_INLINE void Q45_KSums(const uint8_t* bw, const uint8_t* bx, const __m512i* sc_idx, __m256i* is,
                          __m256i* ms) {
  namespace q8k = internal::q8_k;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m128i sm = ScalesMinsK4(bw + L::kScales);
  __m512i qh2 = _mm512_setzero_si512();
  if constexpr (L::kFifthBit) {
    qh2 = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bw + L::kQh)));
  }
  const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));  // scales, int16
  __m512i acc = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    // 64 bytes = groups 2h and 2h + 1: low nibbles are sub-blocks 4h and 4h + 2, high ones
    // 4h + 1 and 4h + 3; pair them up in element order [4h, 4h + 1], [4h + 2, 4h + 3].
    const __m512i bytes = _mm512_loadu_si512(bw + L::kQs + 64 * h);
    const __m512i lo = _mm512_and_si512(bytes, m4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), m4);
    __m512i q0 = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
    __m512i q1 = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2));
    if constexpr (L::kFifthBit) {
      q0 = FifthBit(q0, qh2, 4 * h);
      q1 = FifthBit(q1, qh2, 4 * h + 2);
    }
    const __m512i p0 = _mm512_maddubs_epi16(q0, _mm512_loadu_si512(bx + q8k::kQs + 128 * h));
    const __m512i p1 = _mm512_maddubs_epi16(q1, _mm512_loadu_si512(bx + q8k::kQs + 128 * h + 64));
    acc = DpWssd(acc, p0, _mm512_permutexvar_epi16(sc_idx[2 * h], sc16));
    acc = DpWssd(acc, p1, _mm512_permutexvar_epi16(sc_idx[2 * h + 1], sc16));
  }
  *is = Fold16(acc);
  // m_j twice (int16 lanes 2j, 2j + 1) against the 16 bsums.
  const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
  *ms = _mm256_madd_epi16(mins,
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bx + q8k::kBsums)));
}

inline void Q4KLayout::Sums(const uint8_t* bw, const uint8_t* bx, const __m512i* idx, __m256i* is,
                            __m256i* ms) {
  Q45_KSums<Q4KLayout>(bw, bx, idx, is, ms);
}
inline void Q5KLayout::Sums(const uint8_t* bw, const uint8_t* bx, const __m512i* idx, __m256i* is,
                            __m256i* ms) {
  Q45_KSums<Q5KLayout>(bw, bx, idx, is, ms);
}

// A K-quant with a min (Q2_K, Q4_K, Q5_K; layout L: fp16 d at kD, dmin at kD + 2, and Sums
// giving the 8 lanes of isum and of summ) x Q8_K, one activation row: lane b % 8 += d * isum -
// dmin * summ (d = d_x * d_w, dmin = d_x * dmin_w), as internal::DotQ4_K and friends. Eight
// super-blocks at a time share one transpose of their sums and one vector of float math (a sum
// and scalar float chain per super-block cost 40% of the Q4_K kernel); the rest one by one.
template <class L>
HWY_INLINE float DotDminK(const uint8_t* w, const uint8_t* x, int64_t n) {
  namespace q8k = internal::q8_k;
  __m512i sc_idx[4];
  L::InitIndex(sc_idx);
  // (d, dmin) half pairs of 8 super-blocks -> the 8 d halves, then the 8 dmin halves.
  const __m256i deinterleave =
      _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12,
                       13, 2, 3, 6, 7, 10, 11, 14, 15);
  const int64_t nsb = n / kQKK;
  __m256 acc = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + kBlockLanes <= nsb; b += kBlockLanes) {
    __m256i is[kBlockLanes], ms[kBlockLanes];
    alignas(32) uint32_t dm[kBlockLanes];
    alignas(32) float yd[kBlockLanes];
    for (int k = 0; k < kBlockLanes; ++k) {
      const uint8_t* bw = w + (b + k) * L::kBytes;
      const uint8_t* bx = x + (b + k) * q8k::kBytes;
      L::Sums(bw, bx, sc_idx, &is[k], &ms[k]);
      dm[k] = internal::LoadU32(bw + L::kD);  // d, then dmin (kDmin = kD + 2)
      yd[k] = internal::LoadF32(bx + q8k::kD);
    }
    const __m256i isum = Transpose8Sum(is), summ = Transpose8Sum(ms);
    const __m256i halves = _mm256_permute4x64_epi64(
        _mm256_shuffle_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(dm)), deinterleave),
        _MM_SHUFFLE(3, 1, 2, 0));
    const __m256 ydv = _mm256_load_ps(yd);
    const __m256 d = _mm256_mul_ps(ydv, _mm256_cvtph_ps(_mm256_castsi256_si128(halves)));
    const __m256 dmin = _mm256_mul_ps(ydv, _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1)));
    acc = _mm256_add_ps(acc, _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(isum)),
                                           _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summ))));
  }
  alignas(32) float lanes[kBlockLanes];
  _mm256_store_ps(lanes, acc);
  for (; b < nsb; ++b) {
    const uint8_t* bw = w + b * L::kBytes;
    const uint8_t* bx = x + b * q8k::kBytes;
    __m256i is, ms;
    L::Sums(bw, bx, sc_idx, &is, &ms);
    int32_t isum, summ;
    Hsum8x2(is, ms, &isum, &summ);
    const float yd = internal::LoadF32(bx + q8k::kD);
    const float d = yd * Half(bw + L::kD);
    const float dmin = yd * Half(bw + L::kD + 2);
    lanes[b % kBlockLanes] += d * static_cast<float>(isum) - dmin * static_cast<float>(summ);
  }
  return internal::SumBlockLanes(lanes);
}

// One Q6_K super-block against one Q8_K block: 8 lanes summing to isum = sum_j sc_j sum_16
// (q6 - 32) q8. Per half h (128 elements): the low nibbles of ql[64h..+64] are elements 128h +
// 0..63 and the high ones 128h + 64..127; qh[32h + l] holds their two top bits at shifts 0, 2
// (first 64) and 4, 6 (last 64). Unsigned q6 by maddubs, dpwssd by the scale of each 16; the
// offset 32 comes back as 32 * sum_j sc_j bsum_j.
HWY_INLINE __m256i Q6_KSums(const uint8_t* bw, const uint8_t* bx, const __m512i* sc_idx) {
  namespace q6k = internal::q6_k;
  namespace q8k = internal::q8_k;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  // Bits 0-1 (first 32 elements) or 2-3 (next 32) of qh moved to bits 4-5; 4-5 or 6-7 likewise.
  const __m512i shl01 = _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4);
  const __m512i shr23 = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);
  const __m256i sc16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bw + q6k::kScales)));
  const __m512i sc = _mm512_castsi256_si512(sc16);
  const __m512i qh = _mm512_loadu_si512(bw + q6k::kQh);
  __m512i acc = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    const __m512i ql = _mm512_loadu_si512(bw + q6k::kQl + 64 * h);
    const __m512i qhh = h == 0 ? _mm512_shuffle_i64x2(qh, qh, _MM_SHUFFLE(1, 0, 1, 0))
                               : _mm512_shuffle_i64x2(qh, qh, _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                        _mm512_and_si512(_mm512_sllv_epi64(qhh, shl01), m30));
    const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                        _mm512_and_si512(_mm512_srlv_epi64(qhh, shr23), m30));
    const __m512i p0 = _mm512_maddubs_epi16(q01, _mm512_loadu_si512(bx + q8k::kQs + 128 * h));
    const __m512i p1 = _mm512_maddubs_epi16(q23, _mm512_loadu_si512(bx + q8k::kQs + 128 * h + 64));
    acc = DpWssd(acc, p0, _mm512_permutexvar_epi16(sc_idx[2 * h], sc));
    acc = DpWssd(acc, p1, _mm512_permutexvar_epi16(sc_idx[2 * h + 1], sc));
  }
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bx + q8k::kBsums));
  const __m256i offset = _mm256_madd_epi16(sc16, bsums);  // sum_j sc_j bsum_j, in 8 lanes
  return _mm256_sub_epi32(Fold16(acc), _mm256_slli_epi32(offset, 5));
}

struct Q6KLayout {
  static constexpr int kBytes = internal::q6_k::kBytes, kD = internal::q6_k::kD;
  static void InitIndex(__m512i* idx) { ScaleIndex16(idx); }
  static __m256i Sums(const uint8_t* bw, const uint8_t* bx, const __m512i* idx) {
    return Q6_KSums(bw, bx, idx);
  }
};

// A K-quant with one scale (Q3_K, Q6_K; layout L: fp16 d at kD, Sums giving the 8 lanes of
// isum) x Q8_K, one activation row: lane b % 8 += (d_w * d_x) * isum, as internal::DotQ6_K;
// eight super-blocks at a time share one transpose and one vector of float math (as DotDminK).
template <class L>
HWY_INLINE float DotScaleK(const uint8_t* w, const uint8_t* x, int64_t n) {
  namespace q8k = internal::q8_k;
  __m512i sc_idx[4];
  L::InitIndex(sc_idx);
  const int64_t nsb = n / kQKK;
  __m256 acc = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + kBlockLanes <= nsb; b += kBlockLanes) {
    __m256i is[kBlockLanes];
    alignas(16) uint16_t dw[kBlockLanes];
    alignas(32) float yd[kBlockLanes];
    for (int k = 0; k < kBlockLanes; ++k) {
      const uint8_t* bw = w + (b + k) * L::kBytes;
      const uint8_t* bx = x + (b + k) * q8k::kBytes;
      is[k] = L::Sums(bw, bx, sc_idx);
      dw[k] = internal::LoadU16(bw + L::kD);
      yd[k] = internal::LoadF32(bx + q8k::kD);
    }
    const __m256 dd = _mm256_mul_ps(
        _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dw))), _mm256_load_ps(yd));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(Transpose8Sum(is))));
  }
  alignas(32) float lanes[kBlockLanes];
  _mm256_store_ps(lanes, acc);
  for (; b < nsb; ++b) {
    const uint8_t* bw = w + b * L::kBytes;
    const uint8_t* bx = x + b * q8k::kBytes;
    const int32_t isum = Hsum8(L::Sums(bw, bx, sc_idx));
    lanes[b % kBlockLanes] +=
        (Half(bw + L::kD) * internal::LoadF32(bx + q8k::kD)) * static_cast<float>(isum);
  }
  return internal::SumBlockLanes(lanes);
}

#if HWY_TARGET == HWY_AVX3_DL
// Q4_K against a Q8_K row laid out by PermuteQ8_KForQ4_K (for DotDminK). Per 64 weight bytes
// (half h of the super-block): the low nibbles (sub-blocks 4h, 4h + 2) and the high ones (4h + 1,
// 4h + 3) meet their activations in one dpbusd each, every int32 lane a sum of 4 products
// (|.| <= 4 * 15 * 128 = 7680, so exact in int16); packs_epi32 puts both into int16 lanes whose
// pairs share a sub-block, and one dpwssd multiplies by that sub-block's scale. Against the
// element-order kernel this drops 2 cross-lane shuffles, 2 maddubs and the 2 scale permutes of
// each half for one pack and one in-lane byte shuffle.
struct Q4KPermutedLayout {
  static constexpr int kBytes = internal::q4_k::kBytes, kD = internal::q4_k::kD;
  // Byte shuffles of the broadcast scales (ScalesMinsK4) into the int16 scale lanes of half h:
  // in 128-bit lane L, int16 k < 4 is sub-block a = 4h + 2 (L / 2) (from the low nibbles), k >= 4
  // is a + 1 (the high nibbles), high bytes zero.
  static void InitIndex(__m512i* ctl) {
    for (int h = 0; h < 2; ++h) {
      alignas(64) int8_t v[64];
      for (int L = 0; L < 4; ++L) {
        for (int k = 0; k < 8; ++k) {
          v[16 * L + 2 * k] = static_cast<int8_t>(4 * h + 2 * (L / 2) + (k < 4 ? 0 : 1));
          v[16 * L + 2 * k + 1] = static_cast<int8_t>(0x80);
        }
      }
      ctl[h] = _mm512_load_si512(v);
    }
  }
  static void Sums(const uint8_t* bw, const uint8_t* bx, const __m512i* ctl, __m256i* is,
                   __m256i* ms) {
    namespace q8k = internal::q8_k;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m128i sm = ScalesMinsK4(bw + internal::q4_k::kScales);
    const __m512i smb = _mm512_broadcast_i32x4(sm);
    __m512i acc = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i bytes = _mm512_loadu_si512(bw + internal::q4_k::kQs + 64 * h);
      const __m512i lo = _mm512_and_si512(bytes, m4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), m4);
      const __m512i slo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo,
                                              _mm512_loadu_si512(bx + q8k::kQs + 128 * h));
      const __m512i shi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi,
                                              _mm512_loadu_si512(bx + q8k::kQs + 128 * h + 64));
      acc =
          _mm512_dpwssd_epi32(acc, _mm512_packs_epi32(slo, shi), _mm512_shuffle_epi8(smb, ctl[h]));
    }
    *is = Fold16(acc);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
    *ms = _mm256_madd_epi16(mins,
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bx + q8k::kBsums)));
  }
};

// The 4-bit block formats of the prepared kernel. Unsigned(nibbles) gives u >= 0 with weight
// value u - kOffset, so isum = sum u y - kOffset sum y; Offset(s8) is kOffset sum y from the
// prepared 8 sum y. Scales8(bw) is the 8 weight scales as floats; Scale(bw) one of them;
// TailBlock is the exact isum of one block against a plain Q8_0 block (simd_x86*-inl.h).
struct PreparedQ4_0 {
  static constexpr int kBytes = internal::q4_0::kBytes, kQs = internal::q4_0::kQs;
  static __m512i Unsigned(__m512i nibbles) { return nibbles; }  // q, value q - 8
  static __m256i Offset(__m256i s8) { return s8; }
  static __m256 Scales8(const uint8_t* bw) { return x86::Halves8(bw + internal::q4_0::kD, kBytes); }
  static float Scale(const uint8_t* bw) { return internal::LoadHalf(bw + internal::q4_0::kD); }
  static int32_t TailBlock(const uint8_t* bw, const uint8_t* bx) {
    return x86::HsumI32(x86::Q4_0Format::Block(x86::Q4_0Format::Prep(bw), bx));
  }
};
struct PreparedMxfp4 {
  static constexpr int kBytes = internal::mxfp4::kBytes, kQs = internal::mxfp4::kQs;
  // The doubled E2M1 values plus 12 (0..24), so that dpbusd sees unsigned bytes.
  static __m512i Unsigned(__m512i nibbles) {
    const __m512i table = _mm512_broadcast_i32x4(
        _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    return _mm512_shuffle_epi8(table, nibbles);
  }
  static __m256i Offset(__m256i s8) {  // 12 sum y = 8 sum y + 4 sum y (s8 is a multiple of 8)
    return _mm256_add_epi32(s8, _mm256_srai_epi32(s8, 1));
  }
  // internal::E8m0ToFp32Half for 8 blocks: e < 2 ? 0x00200000 << e : (e - 1) << 23, as bits.
  static __m256 Scales8(const uint8_t* bw) {
    alignas(8) uint8_t e[8];
    for (int k = 0; k < 8; ++k) e[k] = bw[k * kBytes + internal::mxfp4::kE];
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
    const __m256i is_tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, is_tiny));
  }
  static float Scale(const uint8_t* bw) {
    return internal::E8m0ToFp32Half(bw[internal::mxfp4::kE]);
  }
  static int32_t TailBlock(const uint8_t* bw, const uint8_t* bx) {
    return x86::HsumI32(x86::Mxfp4Format::Block(x86::Mxfp4Format::Prep(bw), bx));
  }
};

// A 4-bit block format F (Q4_0, MXFP4) x Q8_0 against activations laid out by PrepareQ8_0x8
// (simd.h), 8 blocks per step: per 4 blocks, one two-table byte permute gathers their 64 nibble
// bytes (skipping the scales), the low and high nibbles meet the prepared elements 0..15 and
// 16..31 of the same 4 blocks in two dpbusd, so every int32 lane holds one block's partial sum
// and 4 lanes make a block. Those sums less the offset term are the exact isum of each block;
// lane k += (d_w * d_x) * isum_k, as the reference (quant_legacy.cc, quant_mxfp4.cc).
template <class F>
HWY_INLINE float DotPrepared(const uint8_t* w, const internal::PreparedQ8_0& x, int64_t n) {
  alignas(64) uint8_t gather[64];
  for (int j = 0; j < 64; ++j)
    gather[j] = static_cast<uint8_t>((j / 16) * F::kBytes + F::kQs + j % 16);
  const __m512i idx = _mm512_load_si512(gather);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // Lane k < 8 of the result is block k: blocks 0..3 in lanes 0, 4, 8, 12, blocks 4..7 in 1, 5,..
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  static_assert(4 * F::kBytes > 64 && 4 * F::kBytes <= 128);
  constexpr __mmask64 kRest = (__mmask64{1} << (4 * F::kBytes - 64)) - 1;  // bytes 64.. of 4
  const int64_t nb = n / kQK;
  __m256 acc = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + kBlockLanes <= nb; b += kBlockLanes) {
    const uint8_t* bw = w + b * F::kBytes;
    const int8_t* y = x.qs + b * kQK;  // 256 prepared bytes of these 8 blocks
    __m512i r[2];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* p = bw + 4 * h * F::kBytes;
      const __m512i q = _mm512_permutex2var_epi8(_mm512_loadu_si512(p), idx,
                                                 _mm512_maskz_loadu_epi8(kRest, p + 64));
      const __m512i lo = F::Unsigned(_mm512_and_si512(q, m4));
      const __m512i hi = F::Unsigned(_mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
      const int8_t* yh = y + 128 * h;
      r[h] = _mm512_dpbusd_epi32(
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(yh)), hi,
          _mm512_loadu_si512(yh + 64));
    }
    // Per 128-bit quarter q (block q of r0, block q + 4 of r1): lanes 0 and 1 get their totals.
    const __m512i v =
        _mm512_add_epi32(_mm512_unpacklo_epi32(r[0], r[1]), _mm512_unpackhi_epi32(r[0], r[1]));
    const __m512i u = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_BADC));
    const __m256i isum =
        _mm256_sub_epi32(_mm512_castsi512_si256(_mm512_permutexvar_epi32(order, u)),
                         F::Offset(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.s8 + b))));
    const __m256 dd = _mm256_mul_ps(F::Scales8(bw), _mm256_loadu_ps(x.d + b));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(isum)));
  }
  alignas(32) float lanes[kBlockLanes];
  _mm256_store_ps(lanes, acc);
  for (; b < nb; ++b) {
    const uint8_t* bw = w + b * F::kBytes;
    const int32_t isum = F::TailBlock(bw, x.row + b * internal::q8_0::kBytes);
    lanes[b % kBlockLanes] += (F::Scale(bw) * x.d[b]) * static_cast<float>(isum);
  }
  return internal::SumBlockLanes(lanes);
}
#endif  // HWY_AVX3_DL

}  // namespace x512

float DotQ4_KQ8_K_512(const void* w, const void* x, int64_t n) {
  return x512::DotDminK<x512::Q4KLayout>(static_cast<const uint8_t*>(w),
                                         static_cast<const uint8_t*>(x), n);
}
float DotQ5_KQ8_K_512(const void* w, const void* x, int64_t n) {
  return x512::DotDminK<x512::Q5KLayout>(static_cast<const uint8_t*>(w),
                                         static_cast<const uint8_t*>(x), n);
}
float DotQ6_KQ8_K_512(const void* w, const void* x, int64_t n) {
  return x512::DotScaleK<x512::Q6KLayout>(static_cast<const uint8_t*>(w),
                                          static_cast<const uint8_t*>(x), n);
}
#if HWY_TARGET == HWY_AVX3_DL
float DotQ4_KPermutedQ8_K_512(const void* w, const void* x, int64_t n) {
  return x512::DotDminK<x512::Q4KPermutedLayout>(static_cast<const uint8_t*>(w),
                                                 static_cast<const uint8_t*>(x), n);
}
float DotPreparedQ4_0Q8_0_512(const void* w, const internal::PreparedQ8_0& x, int64_t n) {
  return x512::DotPrepared<x512::PreparedQ4_0>(static_cast<const uint8_t*>(w), x, n);
}
float DotPreparedMxfp4Q8_0_512(const void* w, const internal::PreparedQ8_0& x, int64_t n) {
  return x512::DotPrepared<x512::PreparedMxfp4>(static_cast<const uint8_t*>(w), x, n);
}
#endif

}  // namespace shoal::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // SHOAL_HAVE_X86_512

#endif  // include guard toggle
