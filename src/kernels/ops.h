// Float element-wise and row operations of the forward pass: norms, RoPE, activations, attention.
#pragma once

#include <cstdint>
#include <span>

#include "tensor/dtype.h"

namespace shoal::kernels {

// y = x / sqrt(mean(x^2) + eps) * w (w may be null: no weight). The sum of squares is
// accumulated in double, as ggml does, so results match llama.cpp to float rounding.
// x, y: [n]; may alias.
void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps);

// RoPE variants (ggml's rope modes).
enum class RopeMode { kNorm, kNeox };

// YaRN / linear scaling parameters (ggml's rope_yarn); defaults = plain RoPE.
struct RopeParams {
  int n_rot = 0;  // rotated dimensions (<= head_dim), even
  float freq_base = 10000.f;
  float freq_scale = 1.f;   // 1 / linear scaling factor
  float ext_factor = 0.f;   // YaRN extrapolation mix (0 = off)
  float attn_factor = 1.f;  // magnitude scale
  float beta_fast = 32.f;
  float beta_slow = 1.f;
  int n_ctx_orig = 0;  // training context for YaRN corrections
  RopeMode mode = RopeMode::kNorm;
};

// Fills cache[0..n_rot) with interleaved (cos, sin) for position `pos` (ggml's rope cache:
// theta_i = pos * base^(-2i/n_rot), computed by repeated multiplication like ggml).
void RopeCache(const RopeParams& p, int32_t pos, float* cache /*[n_rot]*/);
// Rotates the first n_rot dims of each of n_heads vectors of length head_dim, in place.
void ApplyRope(const RopeParams& p, const float* cache, float* x, int n_heads, int head_dim);

// y[i] = silu(g[i]) * u[i]   (SwiGLU)
void SwiGlu(const float* g, const float* u, float* y, int64_t n);
float Silu(float x);

// y[i] += x[i]
void AddInPlace(float* y, const float* x, int64_t n);

// In-place softmax over n values.
void Softmax(float* x, int64_t n);

// Attention of one query head against keys/values stored in a paged cache, in key order,
// with an online softmax (one pass). Keys/values of position p live in block
// blocks[p / block_size], slot p % block_size; row pointer = base + (block * block_size + slot)
// * stride bytes. Keys 0..n_kv-1 are attended (the caller applies causality via n_kv).
struct PagedKv {
  const uint8_t* k_base = nullptr;  // K rows for this layer
  const uint8_t* v_base = nullptr;  // V rows for this layer
  uint64_t k_row_stride = 0;        // bytes between consecutive token rows
  uint64_t v_row_stride = 0;
  int64_t k_head_offset = 0;  // element offset of this KV head inside a row
  int64_t v_head_offset = 0;
  DType dtype = DType::kF16;  // F16 or F32
  int block_size = 16;
  std::span<const int32_t> blocks;
};

// Keys per softmax-rescaling tile of the tiled numerics (ggml's KV tile for CPU flash attention).
inline constexpr int kAttnTile = 64;
// llama.cpp only takes its tiled path when the value width is a multiple of the F32 SIMD width
// (16 lanes on the AVX-512 machine the golden data came from); narrower heads stay one-chunk.
inline constexpr int kTiledDvMultiple = 16;
inline bool TiledNumericsApply(int dv) { return dv % kTiledDvMultiple == 0; }

// out[0..dv) = softmax(scale * q.k_j) . v_j over j < n_kv.
// F16 cache: q is rounded to F16, q.k accumulates in F32, and the value accumulator is kept in
// F16 like llama.cpp's CPU flash attention (bit-compatible numerics with its default KV cache).
// With `tiled` (F16 cache only) it follows llama.cpp's tiled flash attention instead: q in F32,
// F32 accumulation, one softmax rescale per kAttnTile keys. llama.cpp picks that path for batches
// of >= 64 query rows; Shoal picks it per token (prompt tokens of long prompts), so results never
// depend on the batch.
// F32 cache: everything in F32 (llama.cpp's non-flash path numerics).
// scratch: max(n_kv, dv + kAttnTile) floats.
void AttendOneHead(const float* q, int dk, int dv, float scale, const PagedKv& kv, int32_t n_kv,
                   float* out, float* scratch, bool tiled = false);

// AttendOneHead for n_heads query heads sharing one KV head (GQA): head h's q at q + h * q_stride
// and its output at out + h * out_stride; same bits as one AttendOneHead call per head, but the
// tiled F16 path converts each tile of keys and values once for all the heads.
void AttendHeads(const float* q, int64_t q_stride, int n_heads, int dk, int dv, float scale,
                 const PagedKv& kv, int32_t n_kv, float* out, int64_t out_stride, float* scratch,
                 bool tiled);
// Scratch floats AttendHeads needs (it may be more than AttendOneHead's).
size_t AttendHeadsScratch(int n_heads, int dk, int dv, int32_t n_kv);

}  // namespace shoal::kernels
