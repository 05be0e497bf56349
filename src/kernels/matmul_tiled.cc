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

constexpr int64_t kLine = 64;  // bytes per cache line (x86, Arm Neoverse)

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
  const uint64_t need = act_bytes * static_cast<uint64_t>(ScratchRows(n_tokens));
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
  // Row r's 4-row group of a pretiled matrix (r a multiple of 4): groups are rg_bytes apart.
  auto tiled_at = [&](int64_t r) {
    return w.data + static_cast<uint64_t>(r / kTileRows) * rg_bytes;
  };
  auto rows = [&](int64_t r0, int64_t r1) {
    thread_local std::vector<uint8_t> buf;  // grows to the largest panel, then reused
    for (int64_t p0 = r0; p0 < r1; p0 += panel_rows) {
      const int64_t p1 = std::min(r1, p0 + panel_rows);
      const int64_t n_rg = (p1 - p0 + kTileRows - 1) / kTileRows;
      const uint8_t* panel = nullptr;
      if (w.tiled) {
        panel = tiled_at(p0);
      } else {
        if (buf.size() < n_rg * rg_bytes) buf.resize(n_rg * rg_bytes);
        for (int64_t g = 0; g < n_rg; ++g) {
          const int64_t r = p0 + g * kTileRows;
          repack(w.data + static_cast<uint64_t>(r) * w.row_bytes, w.row_bytes,
                 static_cast<int>(std::min<int64_t>(kTileRows, p1 - r)), n,
                 buf.data() + g * rg_bytes);
        }
        panel = buf.data();
      }
      // The next panel's weight rows (contiguous) are fetched into L2 while this one computes,
      // spread evenly over its micro-kernel calls: without it the repack waits on DRAM.
      // matmul_bench BM_MatMulCold (weights from DRAM) Q4_0, 1 thread, us, without -> with:
      // 4 tokens 749 -> 389, 8 tokens 833 -> 535, 16 tokens 1156 -> 766; Q8_0 16 tokens
      // 2440 -> 1191; Q4_K 8 tokens 1663 -> 1143 (in-cache runs unchanged or faster).
      const uint8_t* next =
          w.tiled ? tiled_at(p1) : w.data + static_cast<uint64_t>(p1) * w.row_bytes;
      const int64_t next_lines = static_cast<int64_t>(
          (static_cast<uint64_t>(std::min(r1, p1 + panel_rows) - p1) * w.row_bytes + kLine - 1) /
          kLine);
      const int64_t calls = n_rg * ((n_tokens + kTileMaxTokens - 1) / kTileMaxTokens);
      // Pretiled weights read by one token stream from huge pages on the hardware prefetcher
      // alone: the extra requests cost decode 3% (shoal bench tg128, 1b Q4_0, 1 thread: 22.8 ->
      // 23.5 tok/s without them; row path 24.2). Two or three tokens compute long enough per
      // line that the hardware prefetcher falls behind: BM_MatMulCold Q4_0 pretiled, 2 tokens,
      // 1 thread, 10 interleaved pairs on the Zen 5 host: median 146.5 -> 124.5 us with them
      // (4 tokens 144 either way, 2 tokens had been slower than 4).
      const bool one_pass = w.tiled && n_tokens < 2;
      const int64_t per_call = one_pass ? 0 : (next_lines + calls - 1) / calls;
      int64_t fetched = 0;
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
          for (const int64_t end = std::min(next_lines, fetched + per_call); fetched < end;
               ++fetched)
            __builtin_prefetch(next + fetched * kLine, 0, 2);  // 2: into L2 (prefetcht1)
          dot[nt - 1](panel + g * rg_bytes, xs, n, out);
          for (int j = 0; j < nt; ++j)
            for (int i = 0; i < kTileRows; ++i) ybuf[j][g * kTileRows + i] = out[j * kTileRows + i];
        }
        for (int j = 0; j < nt; ++j)
          std::memcpy(y + (t0 + j) * ldy + p0, ybuf[j], sizeof(float) * (p1 - p0));
      }
    }
  };
  if (pool != nullptr && w.rows * w.cols * n_tokens >= kMinParallelMacs) {
    pool->ParallelFor(w.rows, kRowGrain, rows);
  } else {
    rows(0, w.rows);
  }
}

void PretileRows(const MatrixView& w, uint8_t* dst, ThreadPool* pool) {
  const TileType* tt = TileTypeFor(w.type);
  SHOAL_CHECK(tt != nullptr && w.rows % kTileRows == 0 && w.cols % tt->group_elems == 0);
  const uint64_t rg_bytes =
      static_cast<uint64_t>(w.cols / tt->group_elems) * tt->weight_group_bytes;
  SHOAL_CHECK(rg_bytes == kTileRows * w.row_bytes);  // the layout holds the same bytes
  auto groups = [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g)
      tt->repack(w.data + static_cast<uint64_t>(g * kTileRows) * w.row_bytes, w.row_bytes,
                 kTileRows, w.cols, dst + static_cast<uint64_t>(g) * rg_bytes);
  };
  const int64_t n_groups = w.rows / kTileRows;
  if (pool != nullptr) {
    pool->ParallelFor(n_groups, kRowGrain, groups);
  } else {
    groups(0, n_groups);
  }
}

}  // namespace shoal::kernels::internal
