// Batched matrix products: activations quantized once per token, output rows split over the
// thread pool, and every output element computed by the same single-row VecDot, whatever the
// batch and thread count (batch-invariant by construction).
#include "kernels/matmul.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/matmul_tiled.h"
#include "kernels/quant.h"
#include "kernels/quant_internal.h"
#include "kernels/simd.h"
#include "kernels/simd_tile.h"

namespace shoal::kernels {
namespace {

// Output rows per ParallelFor grain. 16 floats are one 64-byte cache line of y per token, so two
// threads never write to the same line; 16 rows of a 4096-wide Q4_0 matrix are 37 KB, enough
// work (tens of microseconds) to hide the pool's wake-up cost. Also the row tile below.
constexpr int64_t kRowGrain = 16;

// Tokens per cache tile: the weight rows of a thread's chunk are streamed from memory once per
// 32 tokens, while the 32 quantized activation rows (70 KB for 2048 Q8_0 columns) stay in L2.
// Inside a tile, 16 weight rows (18 KB of Q4_0 at 2048 columns) and four activation rows stay
// in L1 while all 16 x 32 dots run, four tokens per weight row where a four-row kernel exists.
constexpr int64_t kTokenTile = 32;

}  // namespace

void MatMul(const MatrixView& w, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy, ThreadPool* pool, MatMulScratch* scratch) {
  if (w.rows <= 0 || n_tokens <= 0) return;
  SHOAL_CHECK(w.data != nullptr && x != nullptr && y != nullptr);
  SHOAL_CHECK(ldx >= w.cols && ldy >= w.rows);
  const DType xt = VecDotType(w.type);
  const std::optional<uint64_t> xrow = RowBytes(xt, w.cols);
  SHOAL_CHECK_MSG(xrow.has_value(), "cols is not a multiple of the block size");
  // Four tokens per weight row where the target has it (weights unpacked once for all four);
  // every output still has the bits of `dot`.
  const internal::SimdDot4Fn dot4 = internal::SimdDot4For(internal::BestSimdKernels(), w.type);
  // Where the target has them (Q8_0 activations), kernels that take each activation block's
  // scale as a float, converted once per token here instead of once per weight row.
  const internal::SimdDotXdFn dot_xd = internal::SimdDotXdFor(internal::BestSimdKernels(), w.type);
  const internal::SimdDot4XdFn dot4_xd =
      internal::SimdDot4XdFor(internal::BestSimdKernels(), w.type);
  // Many tokens against a type with register-tiled kernels, or weights laid out for them at
  // load: the tiled path (same bits).
  const bool tiled = w.tiled || (n_tokens >= internal::TiledMinTokens(w.type) &&
                                 internal::HasTiledKernels(w.type));
  // Q4_K on the single-row path (no four-token kernel shares the activation rows): the kernel
  // that takes each Q8_K row re-laid out in place (PermuteQ8_KForQ4_K), same bits.
  const VecDotFn dot_permuted =
      w.type == DType::kQ4_K && !tiled && (dot4 == nullptr || n_tokens < 4)
          ? internal::BestSimdKernels().dot_q4_k_permuted
          : nullptr;
  const VecDotFn dot = dot_permuted != nullptr ? dot_permuted : GetVecDot(w.type);
  const bool use_xd = dot_xd != nullptr && dot4_xd != nullptr && xt == DType::kQ8_0 && !tiled;
  // Single-row kernels that want the activations re-laid out (once per token, here).
  const internal::SimdDotPreparedFn dot_prep =
      xt == DType::kQ8_0 && !tiled
          ? internal::SimdDotPreparedFor(internal::BestSimdKernels(), w.type)
          : nullptr;
  const bool need_xd = use_xd || dot_prep != nullptr;  // float activation scales per block
  const int64_t nb = w.cols / internal::kQK;
  const int64_t xp_stride = internal::PreparedQ8_0Bytes(w.cols);
  const float* xd = nullptr;

  // Activations in the vec-dot type: F32 rows are used in place, others quantized once.
  const uint8_t* xq = reinterpret_cast<const uint8_t*>(x);
  uint64_t xq_stride = static_cast<uint64_t>(ldx) * sizeof(float);
  if (xt != DType::kF32) {
    SHOAL_CHECK(scratch != nullptr);
    const int64_t rows = ScratchRows(n_tokens);
    const uint64_t need = *xrow * static_cast<uint64_t>(rows);
    if (scratch->xq.size() < need) scratch->xq.resize(need);
    uint8_t* buf = scratch->xq.data();
    if (need_xd && scratch->xd.size() < static_cast<size_t>(nb * rows))
      scratch->xd.resize(static_cast<size_t>(nb * rows));
    float* xd_buf = scratch->xd.data();
    if (dot_prep != nullptr) {
      if (scratch->xp.size() < static_cast<size_t>(xp_stride * rows))
        scratch->xp.resize(static_cast<size_t>(xp_stride * rows));
      if (scratch->xs8.size() < static_cast<size_t>(nb * rows))
        scratch->xs8.resize(static_cast<size_t>(nb * rows));
    }
    int8_t* xp_buf = scratch->xp.data();
    int32_t* xs8_buf = scratch->xs8.data();
    const int64_t cols = w.cols;
    auto quantize = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        uint8_t* row = buf + t * *xrow;
        Quantize(xt, x + t * ldx, row, cols);
        if (dot_permuted != nullptr) internal::PermuteQ8_KForQ4_K(row, cols);
        if (dot_prep != nullptr) {
          internal::PrepareQ8_0x8(row, cols, xp_buf + t * xp_stride, xd_buf + t * nb,
                                  xs8_buf + t * nb);
        } else if (use_xd) {
          for (int64_t b = 0; b < nb; ++b)
            xd_buf[t * nb + b] = internal::LoadHalf(row + b * internal::q8_0::kBytes);
        }
      }
    };
    if (pool != nullptr && n_tokens > 1 && n_tokens * cols >= internal::kMinParallelMacs) {
      pool->ParallelFor(n_tokens, 1, quantize);
    } else {
      quantize(0, n_tokens);
    }
    xq = buf;
    xq_stride = *xrow;
    if (need_xd) xd = xd_buf;
  }
  if (tiled) {
    internal::MatMulTiled(w, xq, xq_stride, n_tokens, y, ldy, pool, scratch);
    return;
  }

  // y[t, r] for rows [r0, r1): token tiles outside, row tiles inside, one dot per element.
  auto rows = [&](int64_t r0, int64_t r1) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
      const int64_t t1 = std::min(n_tokens, t0 + kTokenTile);
      for (int64_t rt = r0; rt < r1; rt += kRowGrain) {
        const int64_t rt1 = std::min(r1, rt + kRowGrain);
        int64_t t = t0;
        for (; dot4 != nullptr && t + 4 <= t1; t += 4) {
          const void* xs[4];
          for (int j = 0; j < 4; ++j) xs[j] = xq + static_cast<uint64_t>(t + j) * xq_stride;
          const float* xds[4];
          for (int j = 0; j < 4; ++j) xds[j] = use_xd ? xd + (t + j) * nb : nullptr;
          for (int64_t r = rt; r < rt1; ++r) {
            float out[4];
            const uint8_t* wr = w.data + static_cast<uint64_t>(r) * w.row_bytes;
            if (use_xd) {
              dot4_xd(wr, xs, xds, w.cols, out);
            } else {
              dot4(wr, xs, w.cols, out);
            }
            for (int j = 0; j < 4; ++j) y[(t + j) * ldy + r] = out[j];
          }
        }
        for (; t < t1; ++t) {
          const uint8_t* xt_row = xq + static_cast<uint64_t>(t) * xq_stride;
          float* yt = y + t * ldy;
          if (dot_prep != nullptr) {
            const internal::PreparedQ8_0 xp{xt_row, scratch->xp.data() + t * xp_stride, xd + t * nb,
                                            scratch->xs8.data() + t * nb};
            for (int64_t r = rt; r < rt1; ++r)
              yt[r] = dot_prep(w.data + static_cast<uint64_t>(r) * w.row_bytes, xp, w.cols);
          } else if (use_xd) {
            const float* xdt = xd + t * nb;
            for (int64_t r = rt; r < rt1; ++r)
              yt[r] = dot_xd(w.data + static_cast<uint64_t>(r) * w.row_bytes, xt_row, xdt, w.cols);
          } else {
            for (int64_t r = rt; r < rt1; ++r)
              yt[r] = dot(w.data + static_cast<uint64_t>(r) * w.row_bytes, xt_row, w.cols);
          }
        }
      }
    }
  };
  if (pool != nullptr && w.rows * w.cols * n_tokens >= internal::kMinParallelMacs) {
    pool->ParallelForDynamic(w.rows, kRowGrain, rows);
  } else {
    rows(0, w.rows);
  }
}

bool CanPretile(const MatrixView& w) {
  return !w.tiled && w.type == DType::kQ4_0 && internal::HasTiledKernels(w.type) && w.rows > 0 &&
         w.rows % internal::kTileRows == 0 && w.cols % (internal::kTileBlocks * internal::kQK) == 0;
}

MatrixView Pretile(const MatrixView& w, uint8_t* dst, ThreadPool* pool) {
  SHOAL_CHECK(CanPretile(w));
  internal::PretileRows(w, dst, pool);
  MatrixView t = w;
  t.data = dst;
  t.tiled = true;
  return t;
}

}  // namespace shoal::kernels
