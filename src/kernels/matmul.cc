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

// The kernels one call uses, chosen once per call from the weight type, the batch and the target.
struct Kernels {
  DType xt;       // the activations' vec-dot type
  uint64_t xrow;  // bytes of one activation row in xt
  // Four tokens per weight row where the target has it (weights unpacked once for all four);
  // every output still has the bits of `dot`.
  internal::SimdDot4Fn dot4;
  // Where the target has them (Q8_0 activations), kernels that take each activation block's
  // scale as a float, converted once per token here instead of once per weight row.
  internal::SimdDotXdFn dot_xd;
  internal::SimdDot4XdFn dot4_xd;
  // Many tokens against a type with register-tiled kernels, or weights laid out for them at
  // load: the tiled path (same bits).
  bool tiled;
  // Q4_K on the single-row path (no four-token kernel shares the activation rows): the kernel
  // that takes each Q8_K row re-laid out in place (PermuteQ8_KForQ4_K), same bits.
  VecDotFn dot_permuted;
  VecDotFn dot;  // the single-row kernel
  bool use_xd;   // dot_xd / dot4_xd in place of dot / dot4
  // Single-row kernels that want the activations re-laid out (once per token, in QuantizeRows).
  internal::SimdDotPreparedFn dot_prep;
  bool need_xd;  // float activation scales per block
};

Kernels ChooseKernels(const MatrixView& w, int64_t n_tokens) {
  Kernels k;
  k.xt = VecDotType(w.type);
  const std::optional<uint64_t> xrow = RowBytes(k.xt, w.cols);
  SHOAL_CHECK_MSG(xrow.has_value(), "cols is not a multiple of the block size");
  k.xrow = *xrow;
  const internal::SimdKernels& best = internal::BestSimdKernels();
  k.dot4 = internal::SimdDot4For(best, w.type);
  k.dot_xd = internal::SimdDotXdFor(best, w.type);
  k.dot4_xd = internal::SimdDot4XdFor(best, w.type);
  k.tiled = w.tiled ||
            (n_tokens >= internal::TiledMinTokens(w.type) && internal::HasTiledKernels(w.type));
  k.dot_permuted = w.type == DType::kQ4_K && !k.tiled && (k.dot4 == nullptr || n_tokens < 4)
                       ? best.dot_q4_k_permuted
                       : nullptr;
  k.dot = k.dot_permuted != nullptr ? k.dot_permuted : GetVecDot(w.type);
  k.use_xd = k.dot_xd != nullptr && k.dot4_xd != nullptr && k.xt == DType::kQ8_0 && !k.tiled;
  k.dot_prep =
      k.xt == DType::kQ8_0 && !k.tiled ? internal::SimdDotPreparedFor(best, w.type) : nullptr;
  k.need_xd = k.use_xd || k.dot_prep != nullptr;
  return k;
}

// The activations as the kernels read them: [n_tokens] rows of `stride` bytes in the vec-dot
// type, with per-block float scales (xd) and the prepared Q8_0 layout (xp, xs8) where used.
struct Activations {
  const uint8_t* xq = nullptr;
  uint64_t stride = 0;
  const float* xd = nullptr;     // [n_tokens, nb] when Kernels::need_xd
  const int8_t* xp = nullptr;    // [n_tokens] rows of xp_stride bytes when Kernels::dot_prep
  const int32_t* xs8 = nullptr;  // [n_tokens, nb] when Kernels::dot_prep
  int64_t nb = 0;                // blocks per row
  int64_t xp_stride = 0;         // bytes of one prepared row
};

// One MatMul call: its operands, kernels and activations. The pool's tasks capture only a
// reference to it (and the scratch), small enough for std::function to hold without allocating.
struct Call {
  const MatrixView& w;
  const float* x;  // [n_tokens, ldx]
  int64_t ldx;
  int64_t n_tokens;
  float* y;  // [n_tokens, ldy]
  int64_t ldy;
  Kernels k;
  Activations a;
};

// Makes the scratch hold `rows` rows of every layout the kernels read.
void ReserveScratch(const Call& c, int64_t rows, MatMulScratch* scratch) {
  const uint64_t need = c.k.xrow * static_cast<uint64_t>(rows);
  if (scratch->xq.size() < need) scratch->xq.resize(need);
  if (c.k.need_xd && scratch->xd.size() < static_cast<size_t>(c.a.nb * rows))
    scratch->xd.resize(static_cast<size_t>(c.a.nb * rows));
  if (c.k.dot_prep != nullptr) {
    if (scratch->xp.size() < static_cast<size_t>(c.a.xp_stride * rows))
      scratch->xp.resize(static_cast<size_t>(c.a.xp_stride * rows));
    if (scratch->xs8.size() < static_cast<size_t>(c.a.nb * rows))
      scratch->xs8.resize(static_cast<size_t>(c.a.nb * rows));
  }
}

// Tokens [t0, t1) into the scratch: quantized, then permuted, prepared or with float scales.
void QuantizeRows(const Call& c, MatMulScratch* scratch, int64_t t0, int64_t t1) {
  const Kernels& k = c.k;
  const int64_t cols = c.w.cols;
  const int64_t nb = c.a.nb;
  for (int64_t t = t0; t < t1; ++t) {
    uint8_t* row = scratch->xq.data() + t * k.xrow;
    Quantize(k.xt, c.x + t * c.ldx, row, cols);
    if (k.dot_permuted != nullptr) internal::PermuteQ8_KForQ4_K(row, cols);
    if (k.dot_prep != nullptr) {
      internal::PrepareQ8_0x8(row, cols, scratch->xp.data() + t * c.a.xp_stride,
                              scratch->xd.data() + t * nb, scratch->xs8.data() + t * nb);
    } else if (k.use_xd) {
      float* xd = scratch->xd.data() + t * nb;
      for (int64_t b = 0; b < nb; ++b) xd[b] = internal::LoadHalf(row + b * internal::q8_0::kBytes);
    }
  }
}

// Sets c->a. Activations in the vec-dot type: F32 rows are used in place, others quantized once
// per token into the scratch (over the pool where the batch is big enough).
void PrepareActivations(Call* c, ThreadPool* pool, MatMulScratch* scratch) {
  Activations& a = c->a;
  a.xq = reinterpret_cast<const uint8_t*>(c->x);
  a.stride = static_cast<uint64_t>(c->ldx) * sizeof(float);
  a.nb = c->w.cols / internal::kQK;
  a.xp_stride = internal::PreparedQ8_0Bytes(c->w.cols);
  if (c->k.xt == DType::kF32) return;
  SHOAL_CHECK(scratch != nullptr);
  ReserveScratch(*c, ScratchRows(c->n_tokens), scratch);
  const Call& call = *c;
  auto quantize = [&call, scratch](int64_t t0, int64_t t1) { QuantizeRows(call, scratch, t0, t1); };
  if (pool != nullptr && c->n_tokens > 1 && c->n_tokens * c->w.cols >= internal::kMinParallelMacs) {
    pool->ParallelFor(c->n_tokens, 1, quantize);
  } else {
    quantize(0, c->n_tokens);
  }
  a.xq = scratch->xq.data();
  a.stride = c->k.xrow;
  if (c->k.need_xd) a.xd = scratch->xd.data();
  a.xp = scratch->xp.data();
  a.xs8 = scratch->xs8.data();
}

// y[t .. t + 3, r] for weight rows [r0, r1): one four-token kernel call per row.
inline void DotRowsFourTokens(const Call& c, int64_t t, int64_t r0, int64_t r1) {
  const Kernels& k = c.k;
  const Activations& a = c.a;
  const MatrixView& w = c.w;
  const void* xs[4];
  for (int j = 0; j < 4; ++j) xs[j] = a.xq + static_cast<uint64_t>(t + j) * a.stride;
  const float* xds[4];
  for (int j = 0; j < 4; ++j) xds[j] = k.use_xd ? a.xd + (t + j) * a.nb : nullptr;
  for (int64_t r = r0; r < r1; ++r) {
    float out[4];
    const uint8_t* wr = w.data + static_cast<uint64_t>(r) * w.row_bytes;
    if (k.use_xd) {
      k.dot4_xd(wr, xs, xds, w.cols, out);
    } else {
      k.dot4(wr, xs, w.cols, out);
    }
    for (int j = 0; j < 4; ++j) c.y[(t + j) * c.ldy + r] = out[j];
  }
}

// y[t, r] for weight rows [r0, r1): one single-row kernel call per row.
inline void DotRowsOneToken(const Call& c, int64_t t, int64_t r0, int64_t r1) {
  const Kernels& k = c.k;
  const Activations& a = c.a;
  const MatrixView& w = c.w;
  const uint8_t* xt_row = a.xq + static_cast<uint64_t>(t) * a.stride;
  float* yt = c.y + t * c.ldy;
  if (k.dot_prep != nullptr) {
    const internal::PreparedQ8_0 xp{xt_row, a.xp + t * a.xp_stride, a.xd + t * a.nb,
                                    a.xs8 + t * a.nb};
    for (int64_t r = r0; r < r1; ++r)
      yt[r] = k.dot_prep(w.data + static_cast<uint64_t>(r) * w.row_bytes, xp, w.cols);
  } else if (k.use_xd) {
    const float* xdt = a.xd + t * a.nb;
    for (int64_t r = r0; r < r1; ++r)
      yt[r] = k.dot_xd(w.data + static_cast<uint64_t>(r) * w.row_bytes, xt_row, xdt, w.cols);
  } else {
    for (int64_t r = r0; r < r1; ++r)
      yt[r] = k.dot(w.data + static_cast<uint64_t>(r) * w.row_bytes, xt_row, w.cols);
  }
}

// y[t, r] for rows [r0, r1): token tiles outside, row tiles inside, one dot per element.
void DotRows(const Call& call, int64_t r0, int64_t r1) {
  const Call c = call;  // a copy of its own: the kernel pointers stay in registers across calls
  for (int64_t t0 = 0; t0 < c.n_tokens; t0 += kTokenTile) {
    const int64_t t1 = std::min(c.n_tokens, t0 + kTokenTile);
    for (int64_t rt = r0; rt < r1; rt += kRowGrain) {
      const int64_t rt1 = std::min(r1, rt + kRowGrain);
      int64_t t = t0;
      for (; c.k.dot4 != nullptr && t + 4 <= t1; t += 4) DotRowsFourTokens(c, t, rt, rt1);
      for (; t < t1; ++t) DotRowsOneToken(c, t, rt, rt1);
    }
  }
}

}  // namespace

void MatMul(const MatrixView& w, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy, ThreadPool* pool, MatMulScratch* scratch) {
  if (w.rows <= 0 || n_tokens <= 0) return;
  SHOAL_CHECK(w.data != nullptr && x != nullptr && y != nullptr);
  SHOAL_CHECK(ldx >= w.cols && ldy >= w.rows);
  Call c{w, x, ldx, n_tokens, y, ldy, ChooseKernels(w, n_tokens), {}};
  PrepareActivations(&c, pool, scratch);
  if (c.k.tiled) {
    internal::MatMulTiled(w, c.a.xq, c.a.stride, n_tokens, y, ldy, pool, scratch);
    return;
  }
  auto rows = [&c](int64_t r0, int64_t r1) { DotRows(c, r0, r1); };
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
