// Quantized formats: dequantize, quantize and dot products per DType, bit-exact with GGUF blocks.
//
// Every weight type has a "vec-dot type" (as in ggml): the format the activation row is
// converted to before the dot product (F32 -> F32, F16 -> F16, BF16 -> BF16, Q4_0/Q5_0/Q8_0/
// MXFP4 -> Q8_0, Q4_1/Q5_1 -> Q8_1, K-quants -> Q8_K). Integer sums inside a block are exact;
// float sums across blocks run in one fixed order, so a row's dot never depends on which other
// rows or columns are computed with it (DESIGN.md principle 2).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace shoal::kernels {

// The activation format used for dot products against weights of type `w`.
DType VecDotType(DType w);

// True if Dequantize/VecDot support `t` as a weight type; Quantize support is QuantizeSupported.
bool IsSupportedWeightType(DType t);
bool QuantizeSupported(DType t);

// dst[0..n) = values of n elements of type t. n must be a multiple of the block size.
void Dequantize(DType t, const void* src, float* dst, int64_t n);

// Quantizes n floats into type t (n a multiple of the block size). For weights this is the
// reference quantizer (bit-exact with ggml's quantize_row_*_ref); for the activation types
// (Q8_0, Q8_1, Q8_K, F16, BF16) it is the same rounding llama.cpp's CPU backend applies to
// activations, so integer dot products see the same values.
void Quantize(DType t, const float* src, void* dst, int64_t n);

// Quantizes weights exactly as llama-quantize does without an importance matrix (ggml's
// quantize_row_*_ref) for every supported type. Equal to Quantize except for Q8_0 and Q8_1,
// whose reference rounds x * (1 / d) half away from zero where the activation path rounds
// x * (127 / amax) half to even.
void QuantizeWeights(DType t, const float* src, void* dst, int64_t n);

// Dot product of a weight row `w` (type wt, n elements) with an activation row `x` already in
// VecDotType(wt). Dispatches to the best SIMD target at runtime, bit-identical to ref::VecDot.
// x must come from Quantize (its int8 quants never hold -128, which the SIMD paths rely on).
// Integer sums are exact per block; block results are added in a fixed order (block b into lane
// b % 8, then a fixed tree) that depends only on n, identical on every SIMD target.
float VecDot(DType wt, const void* w, const void* x, int64_t n);

// The function VecDot calls for weight type wt (resolved once to the best SIMD target), for hot
// loops that would rather not switch on the type per row. Same bits as VecDot.
using VecDotFn = float (*)(const void* w, const void* x, int64_t n);
VecDotFn GetVecDot(DType wt);

// Highway's name of the SIMD target in use, e.g. "AVX3_DL", "AVX2" (for logs and benchmarks).
const char* SimdTargetName();

// Scalar reference implementations (the definition of correctness for the SIMD paths).
namespace ref {
void Dequantize(DType t, const void* src, float* dst, int64_t n);
void Quantize(DType t, const float* src, void* dst, int64_t n);
float VecDot(DType wt, const void* w, const void* x, int64_t n);
}  // namespace ref

}  // namespace shoal::kernels
