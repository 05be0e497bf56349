// Internal to src/kernels: register-tiled matrix x matrix kernels (4 weight rows x up to 4
// tokens) over "tiled" layouts that put 16 blocks side by side in the 16 int32 lanes of an
// AVX-512 register, so one VNNI dpbusd per 64 bytes adds to 16 block sums at once and no
// horizontal reduction is needed. Every output has the bits of the single-row VecDot (same exact
// block integers, same float expression per block, same canonical lane order; quant_internal.h).
//
// Layouts (G = ceil(blocks / 16) groups of 16 blocks; blocks past the row end are zero):
//   activations, per token and group (kActGroupBytes): 8 steps of 64 bytes, step s holding in
//     int32 lane k the 4 quants of block k at element offset TileElem(s); then block k's scale
//     as a float (16 x f32); then block k's quant sum (16 x int32).
//   weights, per 4-row group and group of blocks: 4 rows' quants (WeightRowBytes each: Q4_0
//     keeps the packed nibbles, chunk c holding in lane k the 4 qs bytes 4c..4c+3 of block k,
//     whose low nibbles are step 2c and high nibbles step 2c + 1; Q8_0 stores step s as
//     unsigned q + 128), then the 4 rows' block scales (16 x f32 each).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace shoal::kernels::internal {

inline constexpr int kTileBlocks = 16;      // blocks per group: one int32 lane each in a zmm
inline constexpr int kTileRows = 4;         // weight rows per micro-kernel call
inline constexpr int kTileMaxTokens = 4;    // tokens per micro-kernel call (16 accumulators)
inline constexpr int kTileSteps = 8;        // 64-byte steps per group (32 quants x 16 / 64)
inline constexpr int kActGroupBytes = 640;  // 8 x 64 quants + 64 scales + 64 sums

// Element offset inside a block of step s's 4 quants (the Q4_0 nibble order: byte j of qs holds
// elements j and j + 16).
inline constexpr int TileElem(int s) { return (s % 2) * 16 + (s / 2) * 4; }

// Weight quant bytes per row and group for type t (0: no tiled kernel for t).
inline constexpr int TileWeightRowBytes(DType t) {
  return t == DType::kQ4_0 ? 256 : t == DType::kQ8_0 ? 512 : 0;
}
inline constexpr int TileWeightGroupBytes(DType t) {
  return kTileRows * (TileWeightRowBytes(t) + kTileBlocks * 4);
}

// Activation row (Q8_0 blocks, nb of them) -> its tiled layout at dst (groups * 640 bytes).
using TilePackActFn = void (*)(const uint8_t* xq, int64_t nb, uint8_t* dst);
// rows (1..4) weight rows starting at w (row_bytes apart; nb blocks each) -> one 4-row tiled
// panel at dst (groups * TileWeightGroupBytes bytes); missing rows are zero.
using TileRepackFn = void (*)(const uint8_t* w, uint64_t row_bytes, int rows, int64_t nb,
                              uint8_t* dst);
// out[t * 4 + r] = dot(row r of the 4-row panel wp, token t at x[t]) for t < T, r < 4.
using TileDotFn = void (*)(const uint8_t* wp, const uint8_t* const* x, int64_t nb, float* out);

struct TileKernels {
  TilePackActFn pack_act = nullptr;  // null where the target has no tiled kernels
  TileRepackFn repack_q4_0 = nullptr;
  TileRepackFn repack_q8_0 = nullptr;
  TileDotFn dot_q4_0[kTileMaxTokens] = {};  // [T - 1]
  TileDotFn dot_q8_0[kTileMaxTokens] = {};
};

// The best target's tiled kernels (all null where it has none, e.g. without AVX-512 VNNI).
const TileKernels& BestTileKernels();

}  // namespace shoal::kernels::internal
