// Internal to src/kernels: the scalar reference attention (ops.cc) and its AVX2/F16C version
// (attention_x86.cc), which must return exactly the reference's bits.
#pragma once

#include "kernels/ops.h"

namespace shoal::kernels::internal {

// The scalar reference of AttendOneHead (same contract).
void AttendOneHeadReference(const float* q, int dk, int dv, float scale, const PagedKv& kv,
                            int32_t n_kv, float* out, float* scratch, bool tiled);

// The AVX2 + FMA + F16C version; returns false (and does nothing) where the CPU lacks those or
// the head dims are not multiples of 8 up to 1024, so the caller falls back to the reference.
bool AttendOneHeadAvx2(const float* q, int dk, int dv, float scale, const PagedKv& kv, int32_t n_kv,
                       float* out, float* scratch, bool tiled);

// AttendHeads' AVX2 path for the tiled F16 numerics at dv 64 or 128 (false: not applicable, and
// nothing done). scratch: AttendHeadsScratch floats, 32-byte aligned.
bool AttendHeadsTiledAvx2(const float* q, int64_t q_stride, int n_heads, int dk, int dv,
                          float scale, const PagedKv& kv, int32_t n_kv, float* out,
                          int64_t out_stride, float* scratch);

}  // namespace shoal::kernels::internal
