// Per-target int8 block dot products of the other 32-element block formats, on the helpers and
// the block driver of simd_x86-inl.h (included before this file, same targets): Q4_1, Q5_1
// (x Q8_1: a min per block), Q5_0 (a fifth bit) and MXFP4 (a value table) (x Q8_0), one and
// four activation rows. As there, every kernel computes exact int32 block sums and then the
// float expression of its scalar reference, lane by lane.

#if defined(SHOAL_KERNELS_SIMD_X86_Q4_1_Q5_MXFP4_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SHOAL_KERNELS_SIMD_X86_Q4_1_Q5_MXFP4_INL_H_
#undef SHOAL_KERNELS_SIMD_X86_Q4_1_Q5_MXFP4_INL_H_
#else
#define SHOAL_KERNELS_SIMD_X86_Q4_1_Q5_MXFP4_INL_H_
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

}  // namespace shoal::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // SHOAL_HAVE_X86_INT8

#endif  // include guard toggle
