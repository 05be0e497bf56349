// Single-row (decode) Q2_K and Q3_K x Q8_K on 512-bit registers (AVX3, AVX3_DL), through the
// batched super-block loops of simd_x86_512-inl.h: 64 2-bit quants per instruction unpacked by
// one 64-bit-lane shift and a mask, the 16 scales of each super-block widened by word permutes.
// Same bits as internal::DotQ2_K / DotQ3_K (quant_k.cc): exact int32 sums, the same floats.
// Included by simd.cc once per target, after simd_x86_512-inl.h.

#if defined(SHOAL_KERNELS_SIMD_X86_512_Q2_K_Q3_K_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SHOAL_KERNELS_SIMD_X86_512_Q2_K_Q3_K_INL_H_
#undef SHOAL_KERNELS_SIMD_X86_512_Q2_K_Q3_K_INL_H_
#else
#define SHOAL_KERNELS_SIMD_X86_512_Q2_K_Q3_K_INL_H_
#endif

#include <immintrin.h>

#include "hwy/highway.h"
#include "kernels/quant_internal.h"

#if SHOAL_HAVE_X86_512
HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC target("avx512vnni,no-avxvnni")  // EVEX VNNI only (see simd_x86-inl.h)
#endif
namespace shoal::kernels::HWY_NAMESPACE {
namespace x512 {

// The 2-bit quants of elements 128h + 64p .. + 64 (p = 0, 1) from the 32 bytes qs[32h ..]:
// element 128h + 32k + l is bits 2k of qs[32h + l], so bytes 0..31 take shift 2(2p) and bytes
// 32..63 shift 2(2p + 1) of the same 32 bytes (qs2: them twice).
HWY_INLINE __m512i TwoBits(__m512i qs2, int p) {
  const __m512i shift =
      _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi64(4 * p), _mm512_set1_epi64(4 * p + 2));
  return _mm512_and_si512(_mm512_srlv_epi64(qs2, shift), _mm512_set1_epi8(3));
}

// Bit k of hmask[l] moved to bit 2 for elements 32k + l, k = j0 (bytes 0..31) and j0 + 1
// (bytes 32..63): a 64-bit-lane shift by at most 5 keeps bit 2 of each byte from the same byte.
HWY_INLINE __m512i HighBit(__m512i hm2, int j0) {
  const auto lane = [](int j, bool left) {
    return _mm512_set1_epi64(left ? (j < 2 ? 2 - j : 0) : (j > 2 ? j - 2 : 0));
  };
  const __m512i l = _mm512_mask_blend_epi64(0xF0, lane(j0, true), lane(j0 + 1, true));
  const __m512i r = _mm512_mask_blend_epi64(0xF0, lane(j0, false), lane(j0 + 1, false));
  return _mm512_and_si512(_mm512_srlv_epi64(_mm512_sllv_epi64(hm2, l), r), _mm512_set1_epi8(4));
}

HWY_INLINE __m512i Broadcast32(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Q2_K: isum = sum_j (sc_j & 15) sum_16 q2 q8 and summ = sum_j (sc_j >> 4) bsum_j.
struct Q2KLayout {
  static constexpr int kBytes = internal::q2_k::kBytes, kD = internal::q2_k::kD;
  static_assert(internal::q2_k::kDmin == internal::q2_k::kD + 2);
  static void InitIndex(__m512i* idx) { ScaleIndex16(idx); }
  static void Sums(const uint8_t* bw, const uint8_t* bx, const __m512i* idx, __m256i* is,
                   __m256i* ms) {
    namespace q2k = internal::q2_k;
    namespace q8k = internal::q8_k;
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bw + q2k::kScales));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(packed, m4)));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
    __m512i acc = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i qs2 = Broadcast32(bw + q2k::kQs + 32 * h);
      for (int p = 0; p < 2; ++p) {
        const __m512i y = _mm512_loadu_si512(bx + q8k::kQs + 128 * h + 64 * p);
        acc = DpWssd(acc, _mm512_maddubs_epi16(TwoBits(qs2, p), y),
                     _mm512_permutexvar_epi16(idx[2 * h + p], sc));
      }
    }
    *is = Fold16(acc);
    *ms = _mm256_madd_epi16(mins,
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bx + q8k::kBsums)));
  }
};

// Q3_K: q = q2 - 4 (hmask bit clear) or q2 (set), so with u = q2 | hbit << 2 in 0..7,
// isum = sum_j s_j sum_16 u q8 - 4 sum_j s_j bsum_j, s_j the signed 6-bit scales minus 32.
struct Q3KLayout {
  static constexpr int kBytes = internal::q3_k::kBytes, kD = internal::q3_k::kD;
  static void InitIndex(__m512i* idx) { ScaleIndex16(idx); }
  // internal::UnpackQ3KScales in registers: low 4 bits from packed[j % 8] (>> 4 for j >= 8),
  // top 2 bits from packed[8 + j % 4] >> 2 (j / 4). A masked load: the 12 bytes end 2 before
  // the block does.
  static __m256i Scales16(const uint8_t* p) {
    const __m128i packed = _mm_maskz_loadu_epi8(0x0FFF, p);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i lo =
        _mm_unpacklo_epi64(_mm_and_si128(packed, m4), _mm_and_si128(_mm_srli_epi16(packed, 4), m4));
    const __m128i top4 = _mm_shuffle_epi32(packed, _MM_SHUFFLE(2, 2, 2, 2));  // packed[8..11]
    const __m128i hi =
        _mm_and_si128(_mm_srlv_epi32(top4, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    const __m128i s = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
    return _mm256_cvtepi8_epi16(s);
  }
  static __m256i Sums(const uint8_t* bw, const uint8_t* bx, const __m512i* idx) {
    namespace q3k = internal::q3_k;
    namespace q8k = internal::q8_k;
    const __m256i sc16 = Scales16(bw + q3k::kScales);
    const __m512i sc = _mm512_castsi256_si512(sc16);
    const __m512i hm2 = Broadcast32(bw + q3k::kHmask);
    __m512i acc = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i qs2 = Broadcast32(bw + q3k::kQs + 32 * h);
      for (int p = 0; p < 2; ++p) {
        const __m512i u = _mm512_or_si512(TwoBits(qs2, p), HighBit(hm2, 4 * h + 2 * p));
        const __m512i y = _mm512_loadu_si512(bx + q8k::kQs + 128 * h + 64 * p);
        acc = DpWssd(acc, _mm512_maddubs_epi16(u, y), _mm512_permutexvar_epi16(idx[2 * h + p], sc));
      }
    }
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bx + q8k::kBsums));
    const __m256i offset = _mm256_madd_epi16(sc16, bsums);  // sum_j s_j bsum_j, in 8 lanes
    return _mm256_sub_epi32(Fold16(acc), _mm256_slli_epi32(offset, 2));
  }
};

}  // namespace x512

float DotQ2_KQ8_K_512(const void* w, const void* x, int64_t n) {
  return x512::DotDminK<x512::Q2KLayout>(static_cast<const uint8_t*>(w),
                                         static_cast<const uint8_t*>(x), n);
}
float DotQ3_KQ8_K_512(const void* w, const void* x, int64_t n) {
  return x512::DotScaleK<x512::Q3KLayout>(static_cast<const uint8_t*>(w),
                                          static_cast<const uint8_t*>(x), n);
}

}  // namespace shoal::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // SHOAL_HAVE_X86_512

#endif  // include guard toggle
