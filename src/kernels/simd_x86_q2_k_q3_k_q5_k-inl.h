// Per-target single-row int8 dot products of the other K-quants, Q2_K, Q3_K and Q5_K (x Q8_K), on
// the helpers of simd_x86-inl.h (included before this file, same targets). As there, every
// kernel computes exact int32 sums and then the float expression of its scalar reference
// (quant_k.cc), lane by lane.

#if defined(SHOAL_KERNELS_SIMD_X86_Q2_K_Q3_K_Q5_K_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SHOAL_KERNELS_SIMD_X86_Q2_K_Q3_K_Q5_K_INL_H_
#undef SHOAL_KERNELS_SIMD_X86_Q2_K_Q3_K_Q5_K_INL_H_
#else
#define SHOAL_KERNELS_SIMD_X86_Q2_K_Q3_K_Q5_K_INL_H_
#endif

#include <immintrin.h>

#include "hwy/highway.h"
#include "kernels/quant_internal.h"

#if SHOAL_HAVE_X86_INT8
HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC target("avx512vnni,no-avxvnni")  // as in simd_x86-inl.h
#endif
namespace shoal::kernels::HWY_NAMESPACE {
namespace x86 {

// Q2_K / Q3_K: the 2-bit field k (0..3) of the 32 qs bytes of half h = elements 128h + 32k + l.
HWY_INLINE __m256i TwoBits(__m256i qs, int k) {
  return _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
}

// int16 lanes 0..7 (elements 0..15 of a 32-run) get scale lo, lanes 8..15 get hi.
HWY_INLINE __m256i ScalePair(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)),
                          _mm_set1_epi16(static_cast<int16_t>(lo)));
}

}  // namespace x86

// Q2_K: isum = sum_j (sc_j & 15) sum_16 q2 q8, summs = sum_j (sc_j >> 4) bsum_j; block value
// dall * isum - dmin * summs as internal::DotQ2_K.
float DotQ2_KQ8_K(const void* vw, const void* vx, int64_t n) {
  namespace q2k = internal::q2_k;
  namespace q8k = internal::q8_k;
  const auto* w = static_cast<const uint8_t*>(vw);
  const auto* x = static_cast<const uint8_t*>(vx);
  float lanes[x86::kBlockLanes] = {};
  for (int64_t b = 0; b < n / x86::kQKK; ++b) {
    const uint8_t* bw = w + b * q2k::kBytes;
    const uint8_t* bx = x + b * q8k::kBytes;
    const uint8_t* sc = bw + q2k::kScales;
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = x86::LoadU256(bw + q2k::kQs + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i p = _mm256_maddubs_epi16(x86::TwoBits(qs, k),
                                               x86::LoadU256(bx + q8k::kQs + 128 * h + 32 * k));
        const int j = 8 * h + 2 * k;
        acc = _mm256_add_epi32(acc,
                               _mm256_madd_epi16(p, x86::ScalePair(sc[j] & 0xF, sc[j + 1] & 0xF)));
      }
    }
    int32_t summs = 0;
    for (int j = 0; j < 16; ++j)
      summs += (sc[j] >> 4) * internal::LoadI16(bx + q8k::kBsums + 2 * j);
    const float yd = internal::LoadF32(bx + q8k::kD);
    const float dall = yd * internal::LoadHalf(bw + q2k::kD);
    const float dmin = yd * internal::LoadHalf(bw + q2k::kDmin);
    lanes[b % x86::kBlockLanes] +=
        dall * static_cast<float>(x86::HsumI32(acc)) - dmin * static_cast<float>(summs);
  }
  return internal::SumBlockLanes(lanes);
}

// Q3_K: u = q2 + 4 * hbit in 0..7 (value u - 4) by maddubs and the signed scales; the offset
// comes back as 4 * sum_j sc_j bsum_j. Block value (d_w * d_x) * isum as internal::DotQ3_K.
float DotQ3_KQ8_K(const void* vw, const void* vx, int64_t n) {
  namespace q3k = internal::q3_k;
  namespace q8k = internal::q8_k;
  const auto* w = static_cast<const uint8_t*>(vw);
  const auto* x = static_cast<const uint8_t*>(vx);
  float lanes[x86::kBlockLanes] = {};
  for (int64_t b = 0; b < n / x86::kQKK; ++b) {
    const uint8_t* bw = w + b * q3k::kBytes;
    const uint8_t* bx = x + b * q8k::kBytes;
    int8_t sc[16];
    internal::UnpackQ3KScales(bw + q3k::kScales, sc);
    const __m256i hm = x86::LoadU256(bw + q3k::kHmask);
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = x86::LoadU256(bw + q3k::kQs + 32 * h);
      for (int k = 0; k < 4; ++k) {
        // Element 128h + 32k + l has its high bit in bit 4h + k of hmask[l].
        const __m256i hbit = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * h + k)),
                                              _mm256_set1_epi8(1));
        const __m256i u = _mm256_or_si256(x86::TwoBits(qs, k), _mm256_slli_epi16(hbit, 2));
        const __m256i p = _mm256_maddubs_epi16(u, x86::LoadU256(bx + q8k::kQs + 128 * h + 32 * k));
        const int j = 8 * h + 2 * k;
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, x86::ScalePair(sc[j], sc[j + 1])));
      }
    }
    int32_t offset = 0;
    for (int j = 0; j < 16; ++j) offset += sc[j] * internal::LoadI16(bx + q8k::kBsums + 2 * j);
    const int32_t isum = x86::HsumI32(acc) - 4 * offset;
    lanes[b % x86::kBlockLanes] +=
        (internal::LoadHalf(bw + q3k::kD) * internal::LoadF32(bx + q8k::kD)) *
        static_cast<float>(isum);
  }
  return internal::SumBlockLanes(lanes);
}

// Q5_K: Q4_K plus the fifth bits (bit 2g / 2g + 1 of qh[l] for the two halves of group g).
float DotQ5_KQ8_K(const void* vw, const void* vx, int64_t n) {
  namespace q5k = internal::q5_k;
  namespace q8k = internal::q8_k;
  const auto* w = static_cast<const uint8_t*>(vw);
  const auto* x = static_cast<const uint8_t*>(vx);
  const __m256i mask = _mm256_set1_epi8(0x0F);
  float lanes[x86::kBlockLanes] = {};
  for (int64_t b = 0; b < n / x86::kQKK; ++b) {
    const uint8_t* bw = w + b * q5k::kBytes;
    const uint8_t* bx = x + b * q8k::kBytes;
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) internal::ScaleMinK4(j, bw + q5k::kScales, &sc[j], &mn[j]);
    const __m256i qh = x86::LoadU256(bw + q5k::kQh);
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      const __m256i bytes = x86::LoadU256(bw + q5k::kQs + 32 * g);
      const __m256i hb = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * g));
      const __m256i lo =
          _mm256_or_si256(_mm256_and_si256(bytes, mask),
                          _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x01)), 4));
      const __m256i hi =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask),
                          _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x02)), 3));
      const __m256i p0 = _mm256_maddubs_epi16(lo, x86::LoadU256(bx + q8k::kQs + 64 * g));
      const __m256i p1 = _mm256_maddubs_epi16(hi, x86::LoadU256(bx + q8k::kQs + 64 * g + 32));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p0, _mm256_set1_epi16(sc[2 * g])));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * g + 1])));
    }
    int32_t summ = 0;
    for (int j = 0; j < 8; ++j) {
      summ += mn[j] * (internal::LoadI16(bx + q8k::kBsums + 4 * j) +
                       internal::LoadI16(bx + q8k::kBsums + 4 * j + 2));
    }
    const float yd = internal::LoadF32(bx + q8k::kD);
    const float d = yd * internal::LoadHalf(bw + q5k::kD);
    const float dmin = yd * internal::LoadHalf(bw + q5k::kDmin);
    lanes[b % x86::kBlockLanes] +=
        d * static_cast<float>(x86::HsumI32(acc)) - dmin * static_cast<float>(summ);
  }
  return internal::SumBlockLanes(lanes);
}

}  // namespace shoal::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // SHOAL_HAVE_X86_INT8

#endif  // include guard toggle
