// Internal to src/kernels: the SIMD kernels compiled once per Highway target (simd.cc), and the
// runtime choice among them. Every kernel returns exactly the bits of its scalar reference in
// quant_*.cc (same integer sums, same float expressions, same canonical lane order).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant.h"

namespace shoal::kernels::internal {

using SimdDotFn = float (*)(const void* w, const void* x, int64_t n);
using SimdQuantizeFn = void (*)(const float* src, void* dst, int64_t n);
// out[j] = dot(w, x[j]) for j < 4, each with exactly the bits of the single-row dot.
using SimdDot4Fn = void (*)(const void* w, const void* const* x, int64_t n, float* out);
// The same for Q8_0 activations whose block scales are also given as floats: xd[b] (one row) or
// xd[j][b] (four rows) is the exact F32 value of block b's fp16 d. Same bits as without.
using SimdDotXdFn = float (*)(const void* w, const void* x, const float* xd, int64_t n);
using SimdDot4XdFn = void (*)(const void* w, const void* const* x, const float* const* xd,
                              int64_t n, float* out);

// One Q8_0 activation row re-laid out for the single-row Q4_0 and MXFP4 kernels (PrepareQ8_0x8):
// for each group of 8 blocks, 256 bytes: [elements 0..15 of blocks 0..3 | elements 16..31 of blocks
// 0..3 | the same for blocks 4..7]; each block's scale as a float; 8 x the sum of its quants.
// Blocks past the last whole group are read from `row`, the plain Q8_0 row.
struct PreparedQ8_0 {
  const uint8_t* row = nullptr;
  const int8_t* qs = nullptr;   // [n / 256][256]
  const float* d = nullptr;     // [n / 32]
  const int32_t* s8 = nullptr;  // [n / 32]
};
// Bytes of PreparedQ8_0::qs for a row of n elements.
inline int64_t PreparedQ8_0Bytes(int64_t n) { return n / 256 * 256; }
// Fills qs, d and s8 from the Q8_0 row of n elements (portable, once per token per MatMul).
void PrepareQ8_0x8(const uint8_t* row, int64_t n, int8_t* qs, float* d, int32_t* s8);
using SimdDotPreparedFn = float (*)(const void* w, const PreparedQ8_0& x, int64_t n);

// A Q8_K activation row re-laid out in place for the single-row Q4_K kernel: in each 128-element
// half of a super-block the 32-element sub-blocks 1 and 2 swap places ([0, 2, 1, 3]), so that the
// low nibbles of 64 weight bytes (sub-blocks 0 and 2 of the half) meet their activations in one
// load, the high nibbles (1 and 3) in the next. d and bsums stay where they were.
void PermuteQ8_KForQ4_K(uint8_t* row, int64_t n);

// One target's kernels; a null entry means "use the scalar reference" on that target.
struct SimdKernels {
  const char* target = "";  // Highway's target name, e.g. "AVX2", "AVX3_DL", "EMU128"
  SimdDotFn dot_f32 = nullptr;
  SimdDotFn dot_f16 = nullptr;
  SimdDotFn dot_bf16 = nullptr;
  SimdDotFn dot_q8_0 = nullptr;    // Q8_0 weights x Q8_0 activations
  SimdDotFn dot_q4_0 = nullptr;    // Q4_0 x Q8_0
  SimdDotFn dot_q4_k = nullptr;    // Q4_K x Q8_K
  SimdDotFn dot_q6_k = nullptr;    // Q6_K x Q8_K
  SimdDotFn dot_q4_1 = nullptr;    // Q4_1 x Q8_1
  SimdDotFn dot_q5_0 = nullptr;    // Q5_0 x Q8_0
  SimdDotFn dot_q5_1 = nullptr;    // Q5_1 x Q8_1
  SimdDotFn dot_mxfp4 = nullptr;   // MXFP4 x Q8_0
  SimdDotFn dot_q2_k = nullptr;    // Q2_K x Q8_K
  SimdDotFn dot_q3_k = nullptr;    // Q3_K x Q8_K
  SimdDotFn dot_q5_k = nullptr;    // Q5_K x Q8_K
  SimdDot4Fn dot4_q8_0 = nullptr;  // four activation rows per weight row (batched MatMul)
  SimdDot4Fn dot4_q4_0 = nullptr;
  SimdDot4Fn dot4_q4_1 = nullptr;
  SimdDot4Fn dot4_q5_0 = nullptr;
  SimdDot4Fn dot4_q5_1 = nullptr;
  SimdDot4Fn dot4_mxfp4 = nullptr;
  SimdDot4Fn dot4_q4_k = nullptr;
  SimdDot4Fn dot4_q6_k = nullptr;
  SimdDotXdFn dot_xd_q8_0 = nullptr;  // with the activation scales as floats (MatMul)
  SimdDotXdFn dot_xd_q4_0 = nullptr;
  SimdDot4XdFn dot4_xd_q8_0 = nullptr;
  SimdDot4XdFn dot4_xd_q4_0 = nullptr;
  SimdDotPreparedFn dot_prepared_q4_0 = nullptr;   // Q4_0 x PreparedQ8_0 (decode matvec)
  SimdDotPreparedFn dot_prepared_mxfp4 = nullptr;  // MXFP4 x PreparedQ8_0
  SimdDotFn dot_q4_k_permuted = nullptr;           // Q4_K x PermuteQ8_KForQ4_K(Q8_K)
  SimdQuantizeFn quantize_q8_0 = nullptr;          // activation quantizer (x86 AVX semantics)
  SimdQuantizeFn quantize_q8_k = nullptr;          // K-quant activation quantizer (AVX-512 targets)
};

// The best target this CPU supports (chosen once, thread-safe).
const SimdKernels& BestSimdKernels();

// Every compiled target this CPU supports, best first (for tests and benchmarks).
std::vector<const SimdKernels*> AllSimdKernels();

// Target k's dot product for weight type wt, or the scalar reference where k has none.
VecDotFn SimdVecDotFor(const SimdKernels& k, DType wt);

// Target k's four-row dot product for weight type wt, or null (then use the single-row one).
SimdDot4Fn SimdDot4For(const SimdKernels& k, DType wt);

// Target k's one- and four-row dot products taking float activation scales, or null (both are
// null together).
SimdDotXdFn SimdDotXdFor(const SimdKernels& k, DType wt);
SimdDot4XdFn SimdDot4XdFor(const SimdKernels& k, DType wt);

// Target k's single-row kernel on PreparedQ8_0 activations for weight type wt, or null.
SimdDotPreparedFn SimdDotPreparedFor(const SimdKernels& k, DType wt);

}  // namespace shoal::kernels::internal
