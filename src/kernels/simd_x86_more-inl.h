// Per-target int8 block dot products of the less common formats, on the helpers and the block
// driver of simd_x86-inl.h (included before this file, same targets): Q4_1, Q5_1 (x Q8_1),
// Q5_0, MXFP4 (x Q8_0), and Q2_K, Q3_K, Q5_K (x Q8_K). As there, every kernel computes exact
// int32 block sums and then the float expression of its scalar reference, lane by lane.

#if defined(SHOAL_KERNELS_SIMD_X86_MORE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SHOAL_KERNELS_SIMD_X86_MORE_INL_H_
#undef SHOAL_KERNELS_SIMD_X86_MORE_INL_H_
#else
#define SHOAL_KERNELS_SIMD_X86_MORE_INL_H_
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

// 32 bits -> 32 bytes, 0xFF where bit i of the little-endian word at p is set.
HWY_INLINE __m256i BytesFromBits32(const uint8_t* p) {
  const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bytes =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(internal::LoadU32(p))), pick);
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);  // byte k tests bit k
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

// Q5_0/Q5_1 quants 0..31: nibbles plus the fifth bits from the 32-bit qh.
HWY_INLINE __m256i Five32(const uint8_t* qs, const uint8_t* qh) {
  return _mm256_or_si256(Nibbles32(qs),
                         _mm256_and_si256(BytesFromBits32(qh), _mm256_set1_epi8(0x10)));
}

// sum (q - off) y for unsigned q <= 31 and off <= 16: pair sums stay within int16.
HWY_INLINE __m256i DotOffset(__m256i q, __m256i y, int8_t off) {
  const __m256i d16 =
      _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(_mm256_set1_epi8(off), y));
  return _mm256_madd_epi16(d16, _mm256_set1_epi16(1));
}

struct Q5_0Format : Fp16ScaledQ8_0<internal::q5_0::kBytes, internal::q5_0::kD> {
  static __m256i Prep(const uint8_t* bw) {
    return Five32(bw + internal::q5_0::kQs, bw + internal::q5_0::kQh);
  }
  static __m256i Block(__m256i q, const uint8_t* bx) {
    return DotOffset(q, LoadU256(bx + internal::q8_0::kQs), 16);
  }
};

// MXFP4: codes -> doubled E2M1 values (|v| <= 12) by a byte shuffle, then signed x signed.
struct Mxfp4Format {
  static constexpr int kWBytes = internal::mxfp4::kBytes;
  static constexpr int kXBytes = internal::q8_0::kBytes;
  static constexpr bool kHasMin = false;
  static float WScale(const uint8_t* bw) { return internal::E8m0ToFp32Half(bw[0]); }
  static __m256 WScales8(const uint8_t* bw) {
    float s[8];
    for (int k = 0; k < 8; ++k) s[k] = WScale(bw + k * kWBytes);
    return _mm256_loadu_ps(s);
  }
  static __m256 MinProducts8(const uint8_t*, const uint8_t*) { return _mm256_setzero_ps(); }
  static float MinProduct(const uint8_t*, const uint8_t*) { return 0.f; }
  static __m256i Prep(const uint8_t* bw) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(internal::kMxfp4Values)));
    return _mm256_shuffle_epi8(table, Nibbles32(bw + internal::mxfp4::kQs));
  }
  static __m256i Block(__m256i v, const uint8_t* bx) {
    return DotI8I8(v, LoadU256(bx + internal::q8_0::kQs));
  }
};

// Q4_1 / Q5_1 with Q8_1 activations: unsigned quants, plus m_w * s_x per block.
template <int kBytes, int kD, int kM>
struct MinFormatQ8_1 {
  static constexpr int kWBytes = kBytes;
  static constexpr int kXBytes = internal::q8_1::kBytes;
  static constexpr bool kHasMin = true;
  static float WScale(const uint8_t* bw) { return internal::LoadHalf(bw + kD); }
  static __m256 WScales8(const uint8_t* bw) { return Halves8(bw + kD, kBytes); }
  static __m256 MinProducts8(const uint8_t* bw, const uint8_t* bx) {
    return _mm256_mul_ps(Halves8(bw + kM, kBytes), Halves8(bx + internal::q8_1::kS, kXBytes));
  }
  static float MinProduct(const uint8_t* bw, const uint8_t* bx) {
    return internal::LoadHalf(bw + kM) * internal::LoadHalf(bx + internal::q8_1::kS);
  }
  static __m256i Block(__m256i q, const uint8_t* bx) {
    return DotU8I8(q, LoadU256(bx + internal::q8_1::kQs));
  }
};

struct Q4_1Format : MinFormatQ8_1<internal::q4_1::kBytes, internal::q4_1::kD, internal::q4_1::kM> {
  static __m256i Prep(const uint8_t* bw) { return Nibbles32(bw + internal::q4_1::kQs); }
};

struct Q5_1Format : MinFormatQ8_1<internal::q5_1::kBytes, internal::q5_1::kD, internal::q5_1::kM> {
  static __m256i Prep(const uint8_t* bw) {
    return Five32(bw + internal::q5_1::kQs, bw + internal::q5_1::kQh);
  }
};

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

float DotQ5_0Q8_0(const void* w, const void* x, int64_t n) {
  return x86::Dot1<x86::Q5_0Format>(w, x, n);
}
float DotMxfp4Q8_0(const void* w, const void* x, int64_t n) {
  return x86::Dot1<x86::Mxfp4Format>(w, x, n);
}
float DotQ4_1Q8_1(const void* w, const void* x, int64_t n) {
  return x86::Dot1<x86::Q4_1Format>(w, x, n);
}
float DotQ5_1Q8_1(const void* w, const void* x, int64_t n) {
  return x86::Dot1<x86::Q5_1Format>(w, x, n);
}
void Dot4Q5_0Q8_0(const void* w, const void* const* x, int64_t n, float* out) {
  x86::Dot4<x86::Q5_0Format>(w, x, n, out);
}
void Dot4Mxfp4Q8_0(const void* w, const void* const* x, int64_t n, float* out) {
  x86::Dot4<x86::Mxfp4Format>(w, x, n, out);
}
void Dot4Q4_1Q8_1(const void* w, const void* const* x, int64_t n, float* out) {
  x86::Dot4<x86::Q4_1Format>(w, x, n, out);
}
void Dot4Q5_1Q8_1(const void* w, const void* const* x, int64_t n, float* out) {
  x86::Dot4<x86::Q5_1Format>(w, x, n, out);
}

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
