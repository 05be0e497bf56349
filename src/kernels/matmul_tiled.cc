// MatMul's tiled path: Q8_0 activations packed once into the tiled layout, then per thread and
// per panel of weight rows: the panel repacked once (it stays in L2), and every token tile of
// 4 (in L1) run against each 4-row group of the panel by the 4 x 4 micro-kernel.
#include "kernels/matmul_tiled.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_tile.h"

namespace shoal::kernels::internal {
namespace {

// Repacked weight bytes per thread and panel: the panel is read from L2 (1 MB per core on Zen 4
// and 5) while all tokens pass over it, and the activations (n_tokens x 0.6-2.4 KB per group)
// are streamed once per panel. matmul_bench 2048 x 2048, 256 tokens, 1 thread, cpu us, 64-row
// panels -> this budget (128 to 256 rows at 2048 columns, fewer when wider): Q4_0 6321 -> 5886,
// Q8_0 8350 -> 8224, Q4_K 13159 -> 11637, Q6_K 13547 -> 12088 (medians of 3).
constexpr uint64_t kPanelBytes = 384 << 10;
constexpr int64_t kMinPanelRows = 16, kMaxPanelRows = 256;

// Output rows per ParallelFor grain: a multiple of kTileRows, and 16 floats are one 64-byte cache
// line of y per token, so two threads never write the same line.
constexpr int64_t kRowGrain = 16;

}  // namespace

bool HasTiledKernels(DType t) { return TileTypeFor(t) != nullptr; }

void MatMulTiled(const MatrixView& w, const uint8_t* xq, uint64_t xq_stride, int64_t n_tokens,
                 float* y, int64_t ldy, ThreadPool* pool, MatMulScratch* scratch) {
  const TileType* tt = TileTypeFor(w.type);
  SHOAL_CHECK(tt != nullptr);
  const int64_t n = w.cols;
  const int64_t groups = (n + tt->group_elems - 1) / tt->group_elems;
  const uint64_t act_bytes = static_cast<uint64_t>(groups) * tt->act_group_bytes;  // per token
  const uint64_t rg_bytes = static_cast<uint64_t>(groups) * tt->weight_group_bytes;

  // [n_tokens, groups] activation groups, packed once per token.
  const uint64_t need = act_bytes * static_cast<uint64_t>(n_tokens);
  if (scratch->xt.size() < need) scratch->xt.resize(need);
  uint8_t* xt = scratch->xt.data();
  const TilePackActFn pack = tt->pack_act;
  auto pack_tokens = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) pack(xq + t * xq_stride, n, xt + t * act_bytes);
  };
  if (pool != nullptr && n_tokens > 1) {
    pool->ParallelFor(n_tokens, 1, pack_tokens);
  } else {
    pack_tokens(0, n_tokens);
  }

  const TileRepackFn repack = tt->repack;
  const TileDotFn* dot = tt->dot;
  const int64_t panel_rows = std::clamp<int64_t>(
      static_cast<int64_t>(kPanelBytes / rg_bytes) * kTileRows / kMinPanelRows * kMinPanelRows,
      kMinPanelRows, kMaxPanelRows);
  auto rows = [&](int64_t r0, int64_t r1) {
    thread_local std::vector<uint8_t> panel;  // grows to the largest panel, then reused
    for (int64_t p0 = r0; p0 < r1; p0 += panel_rows) {
      const int64_t p1 = std::min(r1, p0 + panel_rows);
      const int64_t n_rg = (p1 - p0 + kTileRows - 1) / kTileRows;
      if (panel.size() < n_rg * rg_bytes) panel.resize(n_rg * rg_bytes);
      for (int64_t g = 0; g < n_rg; ++g) {
        const int64_t r = p0 + g * kTileRows;
        repack(w.data + static_cast<uint64_t>(r) * w.row_bytes, w.row_bytes,
               static_cast<int>(std::min<int64_t>(kTileRows, p1 - r)), n,
               panel.data() + g * rg_bytes);
      }
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kTileMaxTokens) {
        const int nt = static_cast<int>(std::min<int64_t>(kTileMaxTokens, n_tokens - t0));
        const uint8_t* xs[kTileMaxTokens];
        for (int j = 0; j < nt; ++j) xs[j] = xt + (t0 + j) * act_bytes;
        // The panel's outputs for these tokens, then one contiguous copy per token: 4 scattered
        // 16-byte stores per micro-kernel call into y (10+ MB for the FFN, far past the caches)
        // measured 5% of prefill in store misses.
        float ybuf[kTileMaxTokens][kMaxPanelRows];
        for (int64_t g = 0; g < n_rg; ++g) {
          float out[kTileMaxTokens * kTileRows];
          dot[nt - 1](panel.data() + g * rg_bytes, xs, n, out);
          for (int j = 0; j < nt; ++j)
            for (int i = 0; i < kTileRows; ++i) ybuf[j][g * kTileRows + i] = out[j * kTileRows + i];
        }
        for (int j = 0; j < nt; ++j)
          std::memcpy(y + (t0 + j) * ldy + p0, ybuf[j], sizeof(float) * (p1 - p0));
      }
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(w.rows, kRowGrain, rows);
  } else {
    rows(0, w.rows);
  }
}

}  // namespace shoal::kernels::internal
