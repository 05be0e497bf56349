// Internal to src/kernels: MatMul's register-tiled path for many tokens (simd_tile.h kernels).
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace shoal::kernels::internal {

// Fewest tokens for which the tiled path pays for repacking each weight panel (measured with
// matmul_bench; below it MatMul keeps its per-row kernels). Results are the same bits either way.
inline constexpr int64_t kTiledMinTokens = 4;

// True if the best target has tiled kernels for weights of type t.
bool HasTiledKernels(DType t);

// y[t * ldy + r] for every row and token, from Q8_0 activation rows xq (xq_stride bytes apart):
// activations packed once into scratch, weights repacked panel by panel per thread. Each output
// has the bits of the single-row VecDot. Requires HasTiledKernels(w.type).
void MatMulTiled(const MatrixView& w, const uint8_t* xq, uint64_t xq_stride, int64_t n_tokens,
                 float* y, int64_t ldy, ThreadPool* pool, MatMulScratch* scratch);

}  // namespace shoal::kernels::internal
