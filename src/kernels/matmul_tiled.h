// Internal to src/kernels: MatMul's register-tiled path for many tokens (simd_tile.h kernels).
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace shoal::kernels::internal {

// Fewest tokens for which the tiled path pays for repacking each weight panel (below it MatMul
// keeps its per-row kernels; results are the same bits either way). matmul_bench 2048 x 2048,
// 1 thread, cpu us, row path -> tiled: Q4_0 4 tokens 374 -> 172, 8 tokens 771 -> 248; Q8_0
// (gathered repack) 4 tokens 343 -> 582, 8 tokens 715 -> 627; Q4_K 4 tokens 621 -> 645, 8 tokens
// 1248 -> 821; Q6_K (24 gathers per row and 8 super-blocks) 8 tokens 1034 -> 1373, 256 tokens
// 32851 -> 14424.
inline constexpr int64_t TiledMinTokens(DType t) {
  return t == DType::kQ4_0 ? 4 : t == DType::kQ6_K ? 16 : 8;
}

// Below this many multiply-adds (about 6 us of one core's work) a matmul runs on the calling
// thread: waking the pool costs microseconds when idle and a whole scheduler slice (ms) when
// the cores are oversubscribed, which made tiny models 100x slower with 2 threads under load.
inline constexpr int64_t kMinParallelMacs = int64_t{1} << 17;

// True if the best target has tiled kernels for weights of type t.
bool HasTiledKernels(DType t);

// y[t * ldy + r] for every row and token, from Q8_0 activation rows xq (xq_stride bytes apart):
// activations packed once into scratch, weights repacked panel by panel per thread. Each output
// has the bits of the single-row VecDot. Requires HasTiledKernels(w.type).
// w may be row-major (panels repacked per call) or tiled (Pretile: read in place).
void MatMulTiled(const MatrixView& w, const uint8_t* xq, uint64_t xq_stride, int64_t n_tokens,
                 float* y, int64_t ldy, ThreadPool* pool, MatMulScratch* scratch);

// Every 4-row group of row-major w in the tiled layout at dst (kernels::Pretile).
void PretileRows(const MatrixView& w, uint8_t* dst, ThreadPool* pool);

}  // namespace shoal::kernels::internal
