// VecDot tests: every SIMD target against the scalar reference (bit-identical) over sizes from
// 0 to past two SIMD steps and misaligned buffers; and VecDot against a double-precision dot of
// the dequantized operands.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "kernels/quant.h"
#include "kernels/quant_internal.h"
#include "kernels/simd.h"
#include "kernels/test_util.h"

namespace shoal::kernels {
namespace {

using testing::Bits;
using testing::Bytes;
using testing::MisalignedBuffer;
using testing::RandomFloats;

constexpr DType kAllTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,
                               DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                               DType::kQ8_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                               DType::kQ5_K, DType::kQ6_K, DType::kQ8_K, DType::kMXFP4};

// Element counts to sweep: 0, 1, 2, ... blocks up to past two SIMD steps (the int8 kernels
// take 8 blocks per step, the float kernels 32 elements), then larger odd sizes.
std::vector<int64_t> Sizes(DType t) {
  const int64_t bs = Info(t).block_size;
  std::vector<int64_t> out;
  const int64_t max_small = bs == 1 ? 2 * 32 + 9 : 2 * 8 + 3;
  for (int64_t b = 0; b <= max_small; ++b) out.push_back(b * bs);
  for (int64_t b : {31, 40, 67}) out.push_back(b * bs);
  if (bs == 1) out.push_back(4099);
  return out;
}

struct Operands {
  std::vector<uint8_t> w, x;
};

// Weights from the reference quantizer of N(0, 1) data, activations from Quantize.
Operands MakeOperands(DType t, int64_t n, uint32_t seed) {
  const DType xt = VecDotType(t);
  Operands o{std::vector<uint8_t>(Bytes(t, n)), std::vector<uint8_t>(Bytes(xt, n))};
  const auto wf = RandomFloats(n, seed), xf = RandomFloats(n, seed + 1000, 2.0f);
  QuantizeWeights(t, wf.data(), o.w.data(), n);
  Quantize(xt, xf.data(), o.x.data(), n);
  return o;
}

TEST(VecDot, EveryTargetMatchesReferenceBitForBit) {
  const auto targets = internal::AllSimdKernels();
  ASSERT_FALSE(targets.empty());
  for (const auto* k : targets) {
    for (DType t : kAllTypes) {
      const VecDotFn dot = internal::SimdVecDotFor(*k, t);
      for (int64_t n : Sizes(t)) {
        const Operands o = MakeOperands(t, n, static_cast<uint32_t>(n) * 7 + 1);
        const float want = ref::VecDot(t, o.w.data(), o.x.data(), n);
        for (int mis = 0; mis < 4; ++mis) {
          MisalignedBuffer w(o.w.size(), mis), x(o.x.size(), 3 - mis);
          std::copy(o.w.begin(), o.w.end(), w.data());
          std::copy(o.x.begin(), o.x.end(), x.data());
          const float got = dot(w.data(), x.data(), n);
          ASSERT_EQ(Bits(got), Bits(want)) << k->target << " " << DTypeName(t) << " n=" << n
                                           << " misalign=" << mis << ": " << got << " vs " << want;
        }
      }
    }
  }
}

// Raw random bytes as weights (every code, including int8 -128 in Q8_0), with the fp16 scale
// fields rewritten as finite values in [2^-14, 2) and MXFP4 exponents in [100, 150].
TEST(VecDot, RandomBitPatternsMatchReference) {
  struct Case {
    DType type;
    std::vector<int> fp16_offsets;
  };
  const Case cases[] = {
      {DType::kQ8_0, {0}},      {DType::kQ4_0, {0}},    {DType::kQ4_1, {0, 2}},
      {DType::kQ5_0, {0}},      {DType::kQ5_1, {0, 2}}, {DType::kMXFP4, {}},
      {DType::kQ2_K, {80, 82}}, {DType::kQ3_K, {108}},  {DType::kQ4_K, {0, 2}},
      {DType::kQ5_K, {0, 2}},   {DType::kQ6_K, {208}},
  };
  std::mt19937 rng(99);
  for (const auto* k : internal::AllSimdKernels()) {
    for (const Case& c : cases) {
      const DType t = c.type, xt = VecDotType(t);
      const int64_t n = 19 * Info(t).block_size;
      std::vector<uint8_t> w(Bytes(t, n)), x(Bytes(xt, n));
      for (auto& b : w) b = static_cast<uint8_t>(rng());
      const int64_t bb = Info(t).block_bytes;
      for (int64_t b = 0; b < n / Info(t).block_size; ++b) {
        for (int off : c.fp16_offsets) {
          const uint16_t h = static_cast<uint16_t>(0x0400 + rng() % 0x3800);
          std::memcpy(&w[b * bb + off], &h, 2);
        }
        if (t == DType::kMXFP4) w[b * bb] = static_cast<uint8_t>(100 + rng() % 51);
      }
      const auto xf = RandomFloats(n, 3);
      Quantize(xt, xf.data(), x.data(), n);
      const float want = ref::VecDot(t, w.data(), x.data(), n);
      const float got = internal::SimdVecDotFor(*k, t)(w.data(), x.data(), n);
      EXPECT_EQ(Bits(got), Bits(want)) << k->target << " " << DTypeName(t);
    }
  }
}

TEST(VecDot, PublicEntryPointsAgree) {
  for (DType t : kAllTypes) {
    const int64_t n = 4 * 256;
    const Operands o = MakeOperands(t, n, 11);
    const float a = VecDot(t, o.w.data(), o.x.data(), n);
    EXPECT_EQ(Bits(a), Bits(GetVecDot(t)(o.w.data(), o.x.data(), n))) << DTypeName(t);
    EXPECT_EQ(Bits(a), Bits(ref::VecDot(t, o.w.data(), o.x.data(), n))) << DTypeName(t);
  }
  EXPECT_STRNE(SimdTargetName(), "");
}

// The dot equals the exact dot of the dequantized operands up to float rounding: relative to
// sum |w_i x_i|, 1e-5 (8-lane float sums of exact block integers); 2e-3 for Q4_1/Q5_1, whose
// activation sum s is stored as fp16.
TEST(VecDot, MatchesDotOfDequantizedValues) {
  for (DType t : kAllTypes) {
    const DType xt = VecDotType(t);
    for (int64_t blocks : {1, 9, 40}) {
      const int64_t n = blocks * 256;
      const Operands o = MakeOperands(t, n, 23 + static_cast<uint32_t>(blocks));
      std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
      Dequantize(t, o.w.data(), wd.data(), n);
      Dequantize(xt, o.x.data(), xd.data(), n);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += static_cast<double>(wd[i]) * xd[i];
        mag += std::fabs(static_cast<double>(wd[i]) * xd[i]);
      }
      const double tol = (t == DType::kQ4_1 || t == DType::kQ5_1 ? 2e-3 : 1e-5) * mag;
      EXPECT_NEAR(VecDot(t, o.w.data(), o.x.data(), n), exact, tol) << DTypeName(t) << " n=" << n;
    }
  }
}

// SIMD Q8_0 activation quantization: same bytes as the reference on every target.
TEST(VecDot, Q8_0ActivationQuantizerMatchesReferenceOnEveryTarget) {
  for (const auto* k : internal::AllSimdKernels()) {
    if (k->quantize_q8_0 == nullptr) continue;
    for (int64_t blocks : {0, 1, 2, 3, 17, 64}) {
      const int64_t n = blocks * 32;
      auto x = RandomFloats(n, 77 + static_cast<uint32_t>(blocks), 5.0f);
      // Exact ties after scaling: blocks whose amax is 127 and values k + 0.5.
      if (blocks >= 2) {
        x[32] = 127.0f;
        for (int j = 1; j < 32; ++j) x[32 + j] = static_cast<float>(j % 9 - 4) + 0.5f;
      }
      std::vector<uint8_t> want(Bytes(DType::kQ8_0, n));
      ref::Quantize(DType::kQ8_0, x.data(), want.data(), n);
      for (int mis = 0; mis < 4; ++mis) {
        MisalignedBuffer in(x.size() * 4, mis), out(want.size(), 3 - mis);
        if (!x.empty()) std::memcpy(in.data(), x.data(), x.size() * 4);
        k->quantize_q8_0(reinterpret_cast<const float*>(in.data()), out.data(), n);
        ASSERT_EQ(std::vector<uint8_t>(out.data(), out.data() + want.size()), want)
            << k->target << " blocks=" << blocks << " misalign=" << mis;
      }
    }
  }
}

// SIMD Q8_K activation quantization: same bytes as the reference (ties of |x| of both signs,
// exact .5 products, all-zero blocks).
TEST(VecDot, Q8_KActivationQuantizerMatchesReferenceOnEveryTarget) {
  int tested = 0;
  for (const auto* k : internal::AllSimdKernels()) {
    if (k->quantize_q8_k == nullptr) continue;
    ++tested;
    for (int64_t blocks : {0, 1, 3, 8}) {
      const int64_t n = blocks * 256;
      auto x = RandomFloats(n, 91 + static_cast<uint32_t>(blocks), 5.0f);
      if (blocks >= 3) {
        x[256 + 7] = 127.0f;  // |max| tie, the negative first
        x[256 + 3] = -127.0f;
        for (int j = 8; j < 256; ++j) x[256 + j] = static_cast<float>(j % 9 - 4) + 0.5f;
        for (int j = 0; j < 256; ++j) x[512 + j] = 0.0f;
      }
      std::vector<uint8_t> want(Bytes(DType::kQ8_K, n));
      ref::Quantize(DType::kQ8_K, x.data(), want.data(), n);
      for (int mis = 0; mis < 4; ++mis) {
        MisalignedBuffer in(x.size() * 4, mis), out(want.size(), 3 - mis);
        if (!x.empty()) std::memcpy(in.data(), x.data(), x.size() * 4);
        k->quantize_q8_k(reinterpret_cast<const float*>(in.data()), out.data(), n);
        ASSERT_EQ(std::vector<uint8_t>(out.data(), out.data() + want.size()), want)
            << k->target << " blocks=" << blocks << " misalign=" << mis;
      }
    }
  }
  if (std::string(SimdTargetName()).rfind("AVX3", 0) == 0) {
    EXPECT_GT(tested, 0);
  }
}

// The four-row kernels (batched MatMul) give each row exactly the single-row reference bits.
TEST(VecDot, FourRowKernelsMatchReference) {
  int tested = 0;
  for (const auto* k : internal::AllSimdKernels()) {
    for (DType t :
         {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kMXFP4}) {
      const internal::SimdDot4Fn dot4 = internal::SimdDot4For(*k, t);
      if (dot4 == nullptr) continue;
      ++tested;
      const DType xt = VecDotType(t);
      for (int64_t n : Sizes(t)) {
        const Operands o = MakeOperands(t, n, static_cast<uint32_t>(n) + 5);
        MisalignedBuffer w(o.w.size(), static_cast<int>(n / 32 % 4));
        std::copy(o.w.begin(), o.w.end(), w.data());
        std::vector<MisalignedBuffer> xs;
        const void* xp[4];
        float want[4];
        for (int j = 0; j < 4; ++j) {
          const auto xf = RandomFloats(n, static_cast<uint32_t>(n * 4 + j), 1.0f + j);
          std::vector<uint8_t> xq(Bytes(xt, n));
          Quantize(xt, xf.data(), xq.data(), n);
          xs.emplace_back(xq.size(), j);
          std::copy(xq.begin(), xq.end(), xs.back().data());
          want[j] = ref::VecDot(t, o.w.data(), xq.data(), n);
        }
        for (int j = 0; j < 4; ++j) xp[j] = xs[static_cast<size_t>(j)].data();
        float out[4];
        dot4(w.data(), xp, n, out);
        for (int j = 0; j < 4; ++j)
          ASSERT_EQ(Bits(out[j]), Bits(want[j]))
              << k->target << " " << DTypeName(t) << " n=" << n << " row " << j;
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no four-row kernels on this CPU";
}

// The kernels given the activation scales as floats (MatMul) keep the reference bits.
TEST(VecDot, FloatScaleKernelsMatchReference) {
  int tested = 0;
  for (const auto* k : internal::AllSimdKernels()) {
    for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
      const internal::SimdDotXdFn dot1 = internal::SimdDotXdFor(*k, t);
      const internal::SimdDot4XdFn dot4 = internal::SimdDot4XdFor(*k, t);
      if (dot1 == nullptr || dot4 == nullptr) continue;
      ++tested;
      for (int64_t n : Sizes(t)) {
        const Operands o = MakeOperands(t, n, static_cast<uint32_t>(n) + 13);
        MisalignedBuffer w(o.w.size(), static_cast<int>(n / 32 % 4));
        std::copy(o.w.begin(), o.w.end(), w.data());
        std::vector<MisalignedBuffer> xs;
        std::vector<std::vector<float>> xds(4);
        const void* xp[4];
        const float* xdp[4];
        float want[4];
        for (int j = 0; j < 4; ++j) {
          const auto xf = RandomFloats(n, static_cast<uint32_t>(n * 5 + j), 1.0f + j);
          std::vector<uint8_t> xq(Bytes(DType::kQ8_0, n));
          Quantize(DType::kQ8_0, xf.data(), xq.data(), n);
          xs.emplace_back(xq.size(), j);
          std::copy(xq.begin(), xq.end(), xs.back().data());
          for (int64_t b = 0; b < n / 32; ++b)
            xds[static_cast<size_t>(j)].push_back(internal::LoadHalf(xq.data() + b * 34));
          want[j] = ref::VecDot(t, o.w.data(), xq.data(), n);
        }
        for (int j = 0; j < 4; ++j) {
          xp[j] = xs[static_cast<size_t>(j)].data();
          xdp[j] = xds[static_cast<size_t>(j)].data();
        }
        float out[4];
        dot4(w.data(), xp, xdp, n, out);
        for (int j = 0; j < 4; ++j) {
          ASSERT_EQ(Bits(out[j]), Bits(want[j]))
              << k->target << " " << DTypeName(t) << " n=" << n << " row " << j;
          ASSERT_EQ(Bits(dot1(w.data(), xp[j], xdp[j], n)), Bits(want[j]))
              << k->target << " " << DTypeName(t) << " n=" << n << " one row " << j;
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no float-scale kernels on this CPU";
}

// The single-row kernels on re-laid-out activations (PrepareQ8_0x8) keep the reference bits,
// for every block count (whole groups of 8 and tails) and misaligned weight rows.
TEST(VecDot, PreparedActivationKernelsMatchReference) {
  int tested = 0;
  for (const auto* k : internal::AllSimdKernels()) {
    for (DType t : {DType::kQ4_0, DType::kMXFP4}) {
      const internal::SimdDotPreparedFn dot = internal::SimdDotPreparedFor(*k, t);
      if (dot == nullptr) continue;
      ++tested;
      for (int64_t n : Sizes(t)) {
        const Operands o = MakeOperands(t, n, static_cast<uint32_t>(n) * 3 + 5);
        const float want = ref::VecDot(t, o.w.data(), o.x.data(), n);
        std::vector<int8_t> qs(static_cast<size_t>(internal::PreparedQ8_0Bytes(n)));
        std::vector<float> d(static_cast<size_t>(n / 32));
        std::vector<int32_t> s8(static_cast<size_t>(n / 32));
        internal::PrepareQ8_0x8(o.x.data(), n, qs.data(), d.data(), s8.data());
        const internal::PreparedQ8_0 xp{o.x.data(), qs.data(), d.data(), s8.data()};
        for (int mis = 0; mis < 4; ++mis) {
          MisalignedBuffer w(o.w.size(), mis);
          std::copy(o.w.begin(), o.w.end(), w.data());
          ASSERT_EQ(Bits(dot(w.data(), xp, n)), Bits(want))
              << k->target << " " << DTypeName(t) << " n=" << n << " misalign=" << mis;
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no prepared-activation kernels on this CPU";
}

// The Q4_K kernel on Q8_K rows re-laid out by PermuteQ8_KForQ4_K keeps the reference bits.
TEST(VecDot, PermutedQ4_KKernelMatchesReference) {
  int tested = 0;
  for (const auto* k : internal::AllSimdKernels()) {
    if (k->dot_q4_k_permuted == nullptr) continue;
    ++tested;
    for (int64_t n : Sizes(DType::kQ4_K)) {
      const Operands o = MakeOperands(DType::kQ4_K, n, static_cast<uint32_t>(n) * 7 + 1);
      const float want = ref::VecDot(DType::kQ4_K, o.w.data(), o.x.data(), n);
      std::vector<uint8_t> xp(o.x.begin(), o.x.end());
      internal::PermuteQ8_KForQ4_K(xp.data(), n);
      for (int mis = 0; mis < 4; ++mis) {
        MisalignedBuffer w(o.w.size(), mis);
        std::copy(o.w.begin(), o.w.end(), w.data());
        ASSERT_EQ(Bits(k->dot_q4_k_permuted(w.data(), xp.data(), n)), Bits(want))
            << k->target << " n=" << n << " misalign=" << mis;
      }
    }
    // The int16 bound of the lane sums: every nibble 15, every scale and min 63, activations
    // at -128 and 127 (the Q8_K extremes) by sub-block.
    constexpr int64_t n = 8 * internal::kQKK;
    std::vector<uint8_t> w(Bytes(DType::kQ4_K, n), 0xFF), x(Bytes(DType::kQ8_K, n));
    for (int64_t b = 0; b < n / internal::kQKK; ++b) {
      uint8_t* bw = w.data() + b * internal::q4_k::kBytes;
      bw[internal::q4_k::kD] = 0x00, bw[internal::q4_k::kD + 1] = 0x3C;  // d = dmin = 1.0
      bw[internal::q4_k::kDmin] = 0x00, bw[internal::q4_k::kDmin + 1] = 0x3C;
      uint8_t* bx = x.data() + b * internal::q8_k::kBytes;
      const float d = 1.0f;
      std::memcpy(bx + internal::q8_k::kD, &d, 4);
      for (int i = 0; i < internal::kQKK; ++i)
        bx[internal::q8_k::kQs + i] = static_cast<uint8_t>((i / 32 + b) % 2 ? 127 : -128);
      for (int j = 0; j < 16; ++j) {
        const int16_t sum = static_cast<int16_t>(16 * ((j / 2 + b) % 2 ? 127 : -128));
        std::memcpy(bx + internal::q8_k::kBsums + 2 * j, &sum, 2);
      }
    }
    const float want = ref::VecDot(DType::kQ4_K, w.data(), x.data(), n);
    internal::PermuteQ8_KForQ4_K(x.data(), n);
    ASSERT_EQ(Bits(k->dot_q4_k_permuted(w.data(), x.data(), n)), Bits(want)) << k->target;
  }
  if (tested == 0) GTEST_SKIP() << "no permuted Q4_K kernel on this CPU";
}

TEST(VecDot, ReportsTargets) {
  std::string names;
  for (const auto* k : internal::AllSimdKernels()) names += std::string(k->target) + " ";
  std::printf("SIMD targets on this CPU: %s(best: %s)\n", names.c_str(), SimdTargetName());
  SUCCEED();
}

}  // namespace
}  // namespace shoal::kernels
