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
//     unsigned q + 128), then the 4 rows' block scales (Q4_0: 16 x fp16 each, so a 4-row panel
//     has exactly the bytes of its 4 rows and can replace them at load, kernels::Pretile;
//     Q8_0: 16 x f32).
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

// K-quants (Q4_K, Q6_K x Q8_K) group 8 super-blocks; lanes k and k + 8 of a zmm hold super-block
// k's halves h = 0, 1 of each 32-element unit p (elements 32p + 16h + 4 st + [0, 4) at step st):
//   activations, per token and group (kActKGroupBytes): 8 units x 4 steps of 64 bytes; 4 x 64
//     bytes of int16 bsum pairs (bsum 4i + h, bsum 4i + 2 + h) for i < 4; 8 x f32 d (+ padding).
//   weights, per 4-row group and group: 4 rows' quants (Q4_K: 4 x 4 steps of 64 bytes of packed
//     nibbles, unit 2a low and 2a + 1 high; Q6_K: 32 steps of q in 0..63); 4 rows' unit scales
//     (8 x 16 int32); 4 rows' int16 pairs against the bsum pairs (Q4_K: m 2i, 2i + 1; Q6_K: sc
//     4i + h, 4i + 2 + h); 4 rows' d and dmin (8 + 8 f32).
inline constexpr int kTileSuperBlocks = 8;
inline constexpr int kActKGroupBytes = 2048 + 256 + 64;

// One activation row of n elements (Q8_0 or Q8_K) -> its tiled layout at dst.
using TilePackActFn = void (*)(const uint8_t* xq, int64_t n, uint8_t* dst);
// rows (1..4) weight rows of n elements starting at w (row_bytes apart) -> one 4-row tiled panel
// at dst (groups * weight_group_bytes); missing rows are zero.
using TileRepackFn = void (*)(const uint8_t* w, uint64_t row_bytes, int rows, int64_t n,
                              uint8_t* dst);
// out[t * 4 + r] = dot(row r of the 4-row panel wp, token t at x[t]) for t < T, r < 4.
using TileDotFn = void (*)(const uint8_t* wp, const uint8_t* const* x, int64_t n, float* out);

// One weight type's tiled kernels.
struct TileType {
  int group_elems = 0;         // columns per group (512 or 2048)
  int act_group_bytes = 0;     // packed activation bytes per token and group
  int weight_group_bytes = 0;  // repacked weight bytes per 4-row group and group
  TilePackActFn pack_act = nullptr;
  TileRepackFn repack = nullptr;
  TileDotFn dot[kTileMaxTokens] = {};  // [T - 1]
};

struct TileKernels {
  TileType q4_0, q8_0, q4_k, q6_k;  // pack_act null where the target has no tiled kernels
};

// The tiled kernels of weight type t on the best target, or null.
const TileType* TileTypeFor(DType t);

// The best target's tiled kernels (all null where it has none, e.g. without AVX-512 VNNI).
const TileKernels& BestTileKernels();

}  // namespace shoal::kernels::internal
