// Matrix products of a (quantized) weight matrix with a batch of F32 activation rows.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/dtype.h"
#include "threading/thread_pool.h"

namespace shoal::kernels {

// A weight matrix [rows, cols] in one DType; row r starts at data + r * row_bytes, unless
// `tiled`: then data holds the register-tiled layout of Pretile (same bytes in all, rows in
// groups of 4), which only MatMul reads.
struct MatrixView {
  DType type = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
  uint64_t row_bytes = 0;
  bool tiled = false;
};

// Rows a scratch buffer is sized for: n rounded up to 32. Grown to the exact rows of each longer
// prompt step, buffers were reallocated (their pages faulted in afresh) at every new maximum:
// ~2,500 page faults a node for a ~150-row step of a 2048-wide model, each ~20 us on the Zen 5
// VM, paid once per stage of a pipeline. 32 rows: a 256 MB node's prefill chunk (planner).
inline int64_t ScratchRows(int64_t n) { return (n + 31) / 32 * 32; }

// Reusable buffer for quantized activations (grows, never shrinks: no allocation per token).
struct MatMulScratch {
  std::vector<uint8_t> xq;
  std::vector<float> xd;     // Q8_0 activations: each block's scale as a float, [n_tokens, blocks]
  std::vector<uint8_t> xt;   // the tiled path's packed activations (simd_tile.h layout)
  std::vector<int8_t> xp;    // Q8_0 activations re-laid out for the Q4_0 matvec (simd.h)
  std::vector<int32_t> xs8;  // and 8 x the sum of each block's quants, [n_tokens, blocks]
};

// y[t * ldy + r] = dot(W row r, x[t * ldx ...]) for t < n_tokens, r < w.rows.
// x: [n_tokens, ldx] F32 with w.cols used; y: [n_tokens, ldy] F32.
// Each y element equals VecDot(W row r, quantized x_t) bit for bit, whatever n_tokens and the
// thread count are (batch-invariant). pool may be null (single-threaded).
void MatMul(const MatrixView& w, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy, ThreadPool* pool, MatMulScratch* scratch);

// True if w (row-major) can be laid out once for the tiled kernels on this machine: Q4_0 with
// AVX-512 VNNI, rows a multiple of 4 and cols of 512 (whole 16-block groups), so the tiled copy
// has exactly rows * row_bytes bytes. MatMul then skips the per-call repack of weight panels
// (25% of a 1-thread pipeline stage at 8 tokens a step) and streams the tiled bytes instead.
bool CanPretile(const MatrixView& w);
// Writes w's tiled layout to dst (rows * row_bytes bytes) and returns the view of it (same
// results from MatMul, bit for bit). Requires CanPretile(w).
MatrixView Pretile(const MatrixView& w, uint8_t* dst, ThreadPool* pool);

}  // namespace shoal::kernels
