// The public quant API: a table of formats (reference functions per DType) and the runtime
// choice of SIMD kernels, which are bit-identical to the references.
#include "kernels/quant.h"

#include <cstring>
#include <utility>

#include "base/check.h"
#include "kernels/quant_internal.h"
#include "kernels/simd.h"

namespace shoal::kernels {
namespace {

using namespace internal;  // NOLINT(build/namespaces): the reference functions

struct Format {
  DType type;
  DType vec_dot_type;
  DequantizeFn dequantize;
  QuantizeFn quantize_weight;  // ggml's quantize_row_*_ref
  QuantizeFn quantize;         // Quantize(): activation semantics for activation types
  DotFn dot;
};

constexpr Format kFormats[] = {
    {DType::kF32, DType::kF32, DequantizeF32, QuantizeF32, QuantizeF32, DotF32},
    {DType::kF16, DType::kF16, DequantizeF16, QuantizeF16, QuantizeF16, DotF16},
    {DType::kBF16, DType::kBF16, DequantizeBf16, QuantizeBf16, QuantizeBf16, DotBf16},
    {DType::kQ4_0, DType::kQ8_0, DequantizeQ4_0, QuantizeWeightQ4_0, QuantizeWeightQ4_0, DotQ4_0},
    {DType::kQ4_1, DType::kQ8_1, DequantizeQ4_1, QuantizeWeightQ4_1, QuantizeWeightQ4_1, DotQ4_1},
    {DType::kQ5_0, DType::kQ8_0, DequantizeQ5_0, QuantizeWeightQ5_0, QuantizeWeightQ5_0, DotQ5_0},
    {DType::kQ5_1, DType::kQ8_1, DequantizeQ5_1, QuantizeWeightQ5_1, QuantizeWeightQ5_1, DotQ5_1},
    {DType::kQ8_0, DType::kQ8_0, DequantizeQ8_0, QuantizeWeightQ8_0, QuantizeActQ8_0, DotQ8_0},
    {DType::kQ8_1, DType::kQ8_1, DequantizeQ8_1, QuantizeWeightQ8_1, QuantizeActQ8_1, DotQ8_1},
    {DType::kQ2_K, DType::kQ8_K, DequantizeQ2_K, QuantizeWeightQ2_K, QuantizeWeightQ2_K, DotQ2_K},
    {DType::kQ3_K, DType::kQ8_K, DequantizeQ3_K, QuantizeWeightQ3_K, QuantizeWeightQ3_K, DotQ3_K},
    {DType::kQ4_K, DType::kQ8_K, DequantizeQ4_K, QuantizeWeightQ4_K, QuantizeWeightQ4_K, DotQ4_K},
    {DType::kQ5_K, DType::kQ8_K, DequantizeQ5_K, QuantizeWeightQ5_K, QuantizeWeightQ5_K, DotQ5_K},
    {DType::kQ6_K, DType::kQ8_K, DequantizeQ6_K, QuantizeWeightQ6_K, QuantizeWeightQ6_K, DotQ6_K},
    {DType::kQ8_K, DType::kQ8_K, DequantizeQ8_K, QuantizeQ8_K, QuantizeQ8_K, DotQ8_K},
    {DType::kMXFP4, DType::kQ8_0, DequantizeMxfp4, QuantizeWeightMxfp4, QuantizeWeightMxfp4,
     DotMxfp4},
};

const Format* Find(DType t) {
  for (const auto& f : kFormats)
    if (f.type == t) return &f;
  return nullptr;
}

// A supported type and a whole number of blocks: anything else is a caller bug.
const Format& Checked(DType t, int64_t n) {
  const Format* f = Find(t);
  SHOAL_CHECK_MSG(f != nullptr, "unsupported DType for quant kernels");
  SHOAL_CHECK_MSG(n >= 0 && n % Info(t).block_size == 0, "n is not a multiple of the block size");
  return *f;
}

// The reference dot of each type behind the public signature.
template <DotFn F>
float RefDot(const void* w, const void* x, int64_t n) {
  return F(static_cast<const uint8_t*>(w), static_cast<const uint8_t*>(x), n);
}

VecDotFn RefVecDot(DType t) {
  switch (t) {
    case DType::kF32:
      return RefDot<DotF32>;
    case DType::kF16:
      return RefDot<DotF16>;
    case DType::kBF16:
      return RefDot<DotBf16>;
    case DType::kQ4_0:
      return RefDot<DotQ4_0>;
    case DType::kQ4_1:
      return RefDot<DotQ4_1>;
    case DType::kQ5_0:
      return RefDot<DotQ5_0>;
    case DType::kQ5_1:
      return RefDot<DotQ5_1>;
    case DType::kQ8_0:
      return RefDot<DotQ8_0>;
    case DType::kQ8_1:
      return RefDot<DotQ8_1>;
    case DType::kQ2_K:
      return RefDot<DotQ2_K>;
    case DType::kQ3_K:
      return RefDot<DotQ3_K>;
    case DType::kQ4_K:
      return RefDot<DotQ4_K>;
    case DType::kQ5_K:
      return RefDot<DotQ5_K>;
    case DType::kQ6_K:
      return RefDot<DotQ6_K>;
    case DType::kQ8_K:
      return RefDot<DotQ8_K>;
    case DType::kMXFP4:
      return RefDot<DotMxfp4>;
    default:
      return nullptr;
  }
}

}  // namespace

VecDotFn internal::SimdVecDotFor(const internal::SimdKernels& k, DType wt) {
  const std::pair<DType, internal::SimdDotFn> table[] = {
      {DType::kF32, k.dot_f32},   {DType::kF16, k.dot_f16},   {DType::kBF16, k.dot_bf16},
      {DType::kQ8_0, k.dot_q8_0}, {DType::kQ4_0, k.dot_q4_0}, {DType::kQ4_1, k.dot_q4_1},
      {DType::kQ5_0, k.dot_q5_0}, {DType::kQ5_1, k.dot_q5_1}, {DType::kMXFP4, k.dot_mxfp4},
      {DType::kQ2_K, k.dot_q2_k}, {DType::kQ3_K, k.dot_q3_k}, {DType::kQ4_K, k.dot_q4_k},
      {DType::kQ5_K, k.dot_q5_k}, {DType::kQ6_K, k.dot_q6_k},
  };
  for (const auto& [t, f] : table)
    if (t == wt && f != nullptr) return f;
  return RefVecDot(wt);
}

internal::SimdDot4Fn internal::SimdDot4For(const internal::SimdKernels& k, DType wt) {
  const std::pair<DType, internal::SimdDot4Fn> table[] = {
      {DType::kQ8_0, k.dot4_q8_0}, {DType::kQ4_0, k.dot4_q4_0}, {DType::kQ4_1, k.dot4_q4_1},
      {DType::kQ5_0, k.dot4_q5_0}, {DType::kQ5_1, k.dot4_q5_1}, {DType::kMXFP4, k.dot4_mxfp4},
      {DType::kQ4_K, k.dot4_q4_k}, {DType::kQ6_K, k.dot4_q6_k},
  };
  for (const auto& [t, f] : table)
    if (t == wt) return f;
  return nullptr;
}

internal::SimdDotXdFn internal::SimdDotXdFor(const internal::SimdKernels& k, DType wt) {
  if (wt == DType::kQ8_0) return k.dot_xd_q8_0;
  if (wt == DType::kQ4_0) return k.dot_xd_q4_0;
  return nullptr;
}

internal::SimdDot4XdFn internal::SimdDot4XdFor(const internal::SimdKernels& k, DType wt) {
  if (wt == DType::kQ8_0) return k.dot4_xd_q8_0;
  if (wt == DType::kQ4_0) return k.dot4_xd_q4_0;
  return nullptr;
}

internal::SimdDotPreparedFn internal::SimdDotPreparedFor(const internal::SimdKernels& k, DType wt) {
  if (wt == DType::kQ4_0) return k.dot_prepared_q4_0;
  if (wt == DType::kMXFP4) return k.dot_prepared_mxfp4;
  return nullptr;
}

void internal::PrepareQ8_0x8(const uint8_t* row, int64_t n, int8_t* qs, float* d, int32_t* s8) {
  const int64_t nb = n / kQK;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * q8_0::kBytes;
    const auto* q = reinterpret_cast<const int8_t*>(blk + q8_0::kQs);
    d[b] = LoadHalf(blk + q8_0::kD);
    int32_t sum = 0;
    for (int i = 0; i < kQK; ++i) sum += q[i];
    s8[b] = 8 * sum;
    if (b >= nb / 8 * 8) continue;  // tail blocks stay in `row`
    // Block b is the (b % 4)-th of its half (b % 8 / 4) of group b / 8.
    int8_t* half = qs + (b / 8) * 256 + (b % 8 / 4) * 128 + (b % 4) * 16;
    std::memcpy(half, q, 16);            // elements 0..15
    std::memcpy(half + 64, q + 16, 16);  // elements 16..31
  }
}

void internal::PermuteQ8_KForQ4_K(uint8_t* row, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    uint8_t* qs = row + b * q8_k::kBytes + q8_k::kQs;
    for (int h = 0; h < 2; ++h) {
      uint8_t tmp[32];
      std::memcpy(tmp, qs + 128 * h + 32, 32);
      std::memcpy(qs + 128 * h + 32, qs + 128 * h + 64, 32);
      std::memcpy(qs + 128 * h + 64, tmp, 32);
    }
  }
}

DType VecDotType(DType w) {
  const Format* f = Find(w);
  SHOAL_CHECK_MSG(f != nullptr, "unsupported weight DType");
  return f->vec_dot_type;
}

bool IsSupportedWeightType(DType t) { return Find(t) != nullptr; }
bool QuantizeSupported(DType t) { return Find(t) != nullptr; }

void Dequantize(DType t, const void* src, float* dst, int64_t n) {
  ref::Dequantize(t, src, dst, n);
}

void Quantize(DType t, const float* src, void* dst, int64_t n) {
  const Format& f = Checked(t, n);
  if (t == DType::kQ8_0 && BestSimdKernels().quantize_q8_0 != nullptr) {
    BestSimdKernels().quantize_q8_0(src, dst, n);
    return;
  }
  if (t == DType::kQ8_K && BestSimdKernels().quantize_q8_k != nullptr) {
    BestSimdKernels().quantize_q8_k(src, dst, n);
    return;
  }
  f.quantize(src, static_cast<uint8_t*>(dst), n);
}

void QuantizeWeights(DType t, const float* src, void* dst, int64_t n) {
  Checked(t, n).quantize_weight(src, static_cast<uint8_t*>(dst), n);
}

VecDotFn GetVecDot(DType wt) {
  SHOAL_CHECK_MSG(Find(wt) != nullptr, "unsupported weight DType");
  return SimdVecDotFor(BestSimdKernels(), wt);
}

float VecDot(DType wt, const void* w, const void* x, int64_t n) {
  Checked(wt, n);
  return GetVecDot(wt)(w, x, n);
}

const char* SimdTargetName() { return BestSimdKernels().target; }

namespace ref {

void Dequantize(DType t, const void* src, float* dst, int64_t n) {
  Checked(t, n).dequantize(static_cast<const uint8_t*>(src), dst, n);
}

void Quantize(DType t, const float* src, void* dst, int64_t n) {
  Checked(t, n).quantize(src, static_cast<uint8_t*>(dst), n);
}

float VecDot(DType wt, const void* w, const void* x, int64_t n) {
  return Checked(wt, n).dot(static_cast<const uint8_t*>(w), static_cast<const uint8_t*>(x), n);
}

}  // namespace ref
}  // namespace shoal::kernels
