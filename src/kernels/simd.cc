// Highway dynamic-dispatch unit: compiles the SIMD kernels once per x86 target (AVX3_DL, AVX3,
// AVX2, SSE4, SSSE3, scalar) and picks the best one at runtime. The float dot products (F32,
// F16, BF16) and the Q8_0 activation quantizer are portable Highway code for every target; the
// int8 block dot products of all quant formats are raw AVX2 intrinsics, used on the AVX2 and
// AVX-512 targets (elsewhere: the references): simd_x86-inl.h (helpers, the block driver, Q8_0,
// Q4_0, Q4_K, Q6_K), simd_x86_q4_1_q5_mxfp4-inl.h (Q4_1, Q5_0, Q5_1, MXFP4) and
// simd_x86_q2_k_q3_k_q5_k-inl.h. On the AVX-512 targets 512-bit single-row kernels take over the
// K-quants (simd_x86_512-inl.h: Q4_K, Q5_K, Q6_K, and on AVX3_DL Q4_0 and MXFP4 on prepared
// activations; simd_x86_512_q2_k_q3_k-inl.h: Q2_K, Q3_K).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

// AVX3_DL (Ice Lake / Zen 4 and later: AVX-512 VNNI) is opt-in in Highway 1.0.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_internal.h"
#include "kernels/simd.h"
#include "kernels/simd_x86-inl.h"
#include "kernels/simd_x86_q2_k_q3_k_q5_k-inl.h"
#include "kernels/simd_x86_q4_1_q5_mxfp4-inl.h"

// After the 256-bit kernels, whose block formats it reuses for tails.
#include "kernels/simd_x86_512-inl.h"
#include "kernels/simd_x86_512_q2_k_q3_k-inl.h"

HWY_BEFORE_NAMESPACE();
namespace shoal::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using internal::kFloatLanes;
using internal::kQK;

// --- Float dot products in the canonical 32-lane order (internal::DotF32 and friends). ---

struct F32Row {
  template <class D>
  static hn::Vec<D> Load(D d, const uint8_t* p, int64_t i) {
    return hn::LoadU(d, reinterpret_cast<const float*>(p) + i);
  }
  static float Scalar(const uint8_t* p, int64_t i) { return internal::LoadF32(p + 4 * i); }
};

struct F16Row {
  template <class D>
  static hn::Vec<D> Load(D d, const uint8_t* p, int64_t i) {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p) + i));
  }
  static float Scalar(const uint8_t* p, int64_t i) { return internal::LoadHalf(p + 2 * i); }
};

struct Bf16Row {
  template <class D>
  static hn::Vec<D> Load(D d, const uint8_t* p, int64_t i) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::Rebind<uint32_t, D> d32;
    const auto bits = hn::PromoteTo(d32, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p) + i));
    return hn::BitCast(d, hn::ShiftLeft<16>(bits));
  }
  static float Scalar(const uint8_t* p, int64_t i) {
    return Bf16ToFp32(internal::LoadU16(p + 2 * i));
  }
};

// kFloatLanes / N registers of N lanes hold lanes 0..31; element i goes to lane i % 32.
template <class Row>
float DotFloat(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(vw);
  const auto* x = static_cast<const uint8_t*>(vx);
  const hn::ScalableTag<float> d;
  constexpr size_t N = hn::MaxLanes(d);
  static_assert(kFloatLanes % N == 0, "lanes must tile the canonical 32");
  constexpr size_t K = kFloatLanes / N;
  hn::Vec<decltype(d)> acc[K];
  for (size_t k = 0; k < K; ++k) acc[k] = hn::Zero(d);
  int64_t i = 0;
  for (; i + kFloatLanes <= n; i += kFloatLanes) {
    for (size_t k = 0; k < K; ++k) {
      const int64_t e = i + static_cast<int64_t>(k * N);
      acc[k] = hn::Add(acc[k], hn::Mul(Row::Load(d, w, e), Row::Load(d, x, e)));
    }
  }
  float lanes[kFloatLanes];
  for (size_t k = 0; k < K; ++k) hn::StoreU(acc[k], d, lanes + k * N);
  for (; i < n; ++i) lanes[i % kFloatLanes] += Row::Scalar(w, i) * Row::Scalar(x, i);
  return internal::SumFloatLanes(lanes);
}

float DotF32(const void* w, const void* x, int64_t n) { return DotFloat<F32Row>(w, x, n); }
float DotF16(const void* w, const void* x, int64_t n) { return DotFloat<F16Row>(w, x, n); }
float DotBf16(const void* w, const void* x, int64_t n) { return DotFloat<Bf16Row>(w, x, n); }

// --- Q8_0 activation quantizer (internal::QuantizeActQ8_0): amax, d = amax / 127 as fp16,
// q = round-half-even(x * 127 / amax), saturated to int8 as the AVX packs do. ---
void QuantizeQ8_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<uint8_t*>(vy);
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  constexpr size_t N = hn::MaxLanes(df);
  constexpr size_t K = kQK / N;
  static_assert(kQK % N == 0, "a block must hold whole vectors");
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK, y += internal::q8_0::kBytes) {
    hn::Vec<decltype(df)> v[K];
    auto vmax = hn::Zero(df);
    for (size_t k = 0; k < K; ++k) {
      v[k] = hn::LoadU(df, x + k * N);
      vmax = hn::Max(vmax, hn::Abs(v[k]));
    }
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    internal::StoreHalf(y + internal::q8_0::kD, amax / 127.f);
    const auto id = hn::Set(df, amax != 0.0f ? 127.f / amax : 0.0f);
    int8_t* q = reinterpret_cast<int8_t*>(y + internal::q8_0::kQs);
    for (size_t k = 0; k < K; ++k) {
      const auto qi = hn::ConvertTo(di, hn::Round(hn::Mul(v[k], id)));
      hn::StoreU(hn::DemoteTo(d8, qi), d8, q + k * N);
    }
  }
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// --- Q8_K activation quantizer (internal::QuantizeQ8_K) with AVX-512: max = the first element of
// largest |x|, iscale = -127 / max, q = min(127, round-half-even(iscale * x)) (what NearestInt
// gives for |v| <= 127), d = 1 / iscale, bsums of 16. 7.6% of Q4_K_M prefill as scalar code. ---
void QuantizeQ8_K(const float* x, void* vy, int64_t n) {
  namespace q8k = internal::q8_k;
  auto* y = static_cast<uint8_t*>(vy);
  for (int64_t b = 0; b < n / internal::kQKK; ++b, x += internal::kQKK, y += q8k::kBytes) {
    __m512 vmax = _mm512_setzero_ps();
    for (int j = 0; j < internal::kQKK; j += 16)
      vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
    const float amax = _mm512_reduce_max_ps(vmax);
    int16_t bsums[16];
    if (amax == 0.f) {
      internal::StoreF32(y + q8k::kD, 0.f);
      std::memset(y + q8k::kQs, 0, internal::kQKK);
      std::memset(bsums, 0, sizeof(bsums));
    } else {
      float max = 0.f;
      for (int j = 0; j < internal::kQKK; j += 16) {
        const __mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)),
                                               _mm512_set1_ps(amax), _CMP_EQ_OQ);
        if (m != 0) {
          max = x[j + __builtin_ctz(m)];
          break;
        }
      }
      const float iscale = -127.f / max;
      const __m512 vs = _mm512_set1_ps(iscale);
      for (int j = 0; j < internal::kQKK; j += 16) {
        const __m512i q = _mm512_min_epi32(
            _mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + j))), _mm512_set1_epi32(127));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + q8k::kQs + j), _mm512_cvtepi32_epi8(q));
        bsums[j / 16] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
      }
      internal::StoreF32(y + q8k::kD, 1 / iscale);
    }
    std::memcpy(y + q8k::kBsums, bsums, sizeof(bsums));
  }
}
#endif

const internal::SimdKernels* GetKernels() {
  static const internal::SimdKernels kernels = [] {
    internal::SimdKernels k;
    k.target = hwy::TargetName(HWY_TARGET);
    k.dot_f32 = &DotF32;
    k.dot_f16 = &DotF16;
    k.dot_bf16 = &DotBf16;
    k.quantize_q8_0 = &QuantizeQ8_0;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    k.quantize_q8_k = &QuantizeQ8_K;
#endif
#if SHOAL_HAVE_X86_INT8
    k.dot_q8_0 = &DotQ8_0Q8_0;
    k.dot_q4_0 = &DotQ4_0Q8_0;
    k.dot4_q8_0 = &Dot4Q8_0Q8_0;
    k.dot4_q4_0 = &Dot4Q4_0Q8_0;
    k.dot_xd_q8_0 = &DotXdQ8_0Q8_0;
    k.dot_xd_q4_0 = &DotXdQ4_0Q8_0;
    k.dot4_xd_q8_0 = &Dot4XdQ8_0Q8_0;
    k.dot4_xd_q4_0 = &Dot4XdQ4_0Q8_0;
    k.dot_q4_1 = &DotQ4_1Q8_1;
    k.dot_q5_0 = &DotQ5_0Q8_0;
    k.dot_q5_1 = &DotQ5_1Q8_1;
    k.dot_mxfp4 = &DotMxfp4Q8_0;
    k.dot_q2_k = &DotQ2_KQ8_K;
    k.dot_q3_k = &DotQ3_KQ8_K;
    k.dot_q5_k = &DotQ5_KQ8_K;
    k.dot4_q4_1 = &Dot4Q4_1Q8_1;
    k.dot4_q5_0 = &Dot4Q5_0Q8_0;
    k.dot4_q5_1 = &Dot4Q5_1Q8_1;
    k.dot4_mxfp4 = &Dot4Mxfp4Q8_0;
    k.dot4_q4_k = &Dot4Q4_KQ8_K;
    k.dot4_q6_k = &Dot4Q6_KQ8_K;
    k.dot_q4_k = &DotQ4_KQ8_K;
    k.dot_q6_k = &DotQ6_KQ8_K;
#endif
#if SHOAL_HAVE_X86_512
    // The decode matvec on 512-bit registers (same bits as the 256-bit kernels above).
    k.dot_q4_k = &DotQ4_KQ8_K_512;
    k.dot_q5_k = &DotQ5_KQ8_K_512;
    k.dot_q2_k = &DotQ2_KQ8_K_512;
    k.dot_q3_k = &DotQ3_KQ8_K_512;
    k.dot_q6_k = &DotQ6_KQ8_K_512;
#endif
#if HWY_TARGET == HWY_AVX3_DL
    k.dot_prepared_q4_0 = &DotPreparedQ4_0Q8_0_512;
    k.dot_prepared_mxfp4 = &DotPreparedMxfp4Q8_0_512;
    k.dot_q4_k_permuted = &DotQ4_KPermutedQ8_K_512;
#endif
    return k;
  }();
  return &kernels;
}

}  // namespace shoal::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace shoal::kernels::internal {

HWY_EXPORT(GetKernels);

const SimdKernels& BestSimdKernels() {
  static const SimdKernels* best = HWY_DYNAMIC_DISPATCH(GetKernels)();
  return *best;
}

std::vector<const SimdKernels*> AllSimdKernels() {
  std::vector<const SimdKernels*> out;
  const int64_t supported = hwy::SupportedTargets();
  // One entry per compiled target (HWY_TARGETS is a compile-time set), best first.
#define SHOAL_ADD_TARGET(T, NS) \
  if (supported & (T)) out.push_back(NS::GetKernels());
#if HWY_TARGETS & HWY_AVX3_DL
  SHOAL_ADD_TARGET(HWY_AVX3_DL, N_AVX3_DL)
#endif
#if HWY_TARGETS & HWY_AVX3
  SHOAL_ADD_TARGET(HWY_AVX3, N_AVX3)
#endif
#if HWY_TARGETS & HWY_AVX2
  SHOAL_ADD_TARGET(HWY_AVX2, N_AVX2)
#endif
#if HWY_TARGETS & HWY_SSE4
  SHOAL_ADD_TARGET(HWY_SSE4, N_SSE4)
#endif
#if HWY_TARGETS & HWY_SSSE3
  SHOAL_ADD_TARGET(HWY_SSSE3, N_SSSE3)
#endif
#if HWY_TARGETS & HWY_EMU128
  out.push_back(N_EMU128::GetKernels());
#endif
#if HWY_TARGETS & HWY_SCALAR
  out.push_back(N_SCALAR::GetKernels());
#endif
#undef SHOAL_ADD_TARGET
  return out;
}

}  // namespace shoal::kernels::internal
#endif  // HWY_ONCE
