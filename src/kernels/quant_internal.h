// Internal to src/kernels: GGUF block layouts as byte offsets, scalar helpers, the canonical
// cross-block float sum, and the per-format reference entry points that quant.cc dispatches to.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/fp16.h"

namespace shoal::kernels::internal {

inline constexpr int kQK = 32;    // elements per block of Q4_0..Q8_1 and MXFP4 (ggml's QK4_0 etc)
inline constexpr int kQKK = 256;  // elements per K-quant super-block (ggml's QK_K)

// Block layouts (ggml-common.h), as byte offsets inside one block. Blocks are read through
// byte pointers and memcpy, never through struct pointers: rows of 18- or 110-byte blocks are
// not aligned for the scale fields, and the tests feed misaligned buffers on purpose.
namespace q4_0 {
inline constexpr int kBytes = 18, kD = 0, kQs = 2;  // d: fp16; qs: 16 bytes, two 4-bit q each
}
namespace q4_1 {
inline constexpr int kBytes = 20, kD = 0, kM = 2, kQs = 4;
}
namespace q5_0 {
inline constexpr int kBytes = 22, kD = 0, kQh = 2, kQs = 6;  // qh: 32 fifth bits, little endian
}
namespace q5_1 {
inline constexpr int kBytes = 24, kD = 0, kM = 2, kQh = 4, kQs = 8;
}
namespace q8_0 {
inline constexpr int kBytes = 34, kD = 0, kQs = 2;
}
namespace q8_1 {
inline constexpr int kBytes = 36, kD = 0, kS = 2, kQs = 4;  // s = d * sum(qs), fp16
}
namespace mxfp4 {
inline constexpr int kBytes = 17, kE = 0, kQs = 1;  // e: E8M0 exponent
}
namespace q2_k {
inline constexpr int kBytes = 84, kScales = 0, kQs = 16, kD = 80, kDmin = 82;
}
namespace q3_k {
inline constexpr int kBytes = 110, kHmask = 0, kQs = 32, kScales = 96, kD = 108;
}
namespace q4_k {
inline constexpr int kBytes = 144, kD = 0, kDmin = 2, kScales = 4, kQs = 16;
}
namespace q5_k {
inline constexpr int kBytes = 176, kD = 0, kDmin = 2, kScales = 4, kQh = 16, kQs = 48;
}
namespace q6_k {
inline constexpr int kBytes = 210, kQl = 0, kQh = 128, kScales = 192, kD = 208;
}
namespace q8_k {
inline constexpr int kBytes = 292, kD = 0, kQs = 4, kBsums = 260;  // d: f32; bsums: 16 x int16
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline float LoadHalf(const uint8_t* p) { return Fp16ToFp32(LoadU16(p)); }
inline void StoreHalf(uint8_t* p, float f) { StoreU16(p, Fp32ToFp16(f)); }
inline float LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void StoreF32(uint8_t* p, float v) { std::memcpy(p, &v, 4); }
inline int16_t LoadI16(const uint8_t* p) {
  int16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ggml's nearest_int: adding 1.5 * 2^23 leaves the rounded integer (ties to even) in the low
// mantissa bits. Valid for |f| <= 2^22 - 1; outside that it returns the same garbage as ggml.
inline int NearestInt(float f) {
  const float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// ggml's E8M0 -> float, halved (MXFP4's kvalues are doubled E2M1 values): 2^(e - 128).
inline float E8m0ToFp32Half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  return BitsFloat(bits);
}

// MXFP4 code -> doubled E2M1 value (ggml's kvalues_mxfp4).
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// Q4_K/Q5_K packed 6-bit scale and min of sub-block j (0..7) from the 12 scale bytes.
inline void ScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q3_K: the 16 signed 6-bit scales (already minus 32) from the 12 packed scale bytes.
inline void UnpackQ3KScales(const uint8_t* packed, int8_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
    const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

// The canonical cross-block sum of a quantized dot product (DESIGN.md principle 2). Block b's
// float contribution goes to lane b % 8; the lanes are then added in one fixed tree,
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). The order depends only on the number of
// blocks, so a row's dot is the same whatever else is computed beside it, and an 8-lane SIMD
// accumulator (one AVX register of 8 blocks) produces exactly the same bits as this scalar loop.
inline constexpr int kBlockLanes = 8;
inline float SumBlockLanes(const float* lanes) {
  const float a0 = lanes[0] + lanes[4], a1 = lanes[1] + lanes[5];
  const float a2 = lanes[2] + lanes[6], a3 = lanes[3] + lanes[7];
  return (a0 + a2) + (a1 + a3);
}

// The canonical order of float dot products (F32, F16, BF16): element i is accumulated into lane
// i % 32, then the 32 lanes are folded in halves (lane j += lane j + w for w = 16, 8, 4, 2, 1).
// 32 lanes = 4 AVX2 or 2 AVX-512 registers of independent accumulators.
inline constexpr int kFloatLanes = 32;
inline float SumFloatLanes(float* lanes) {
  for (int w = kFloatLanes / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
  return lanes[0];
}

// --- Reference entry points per format (src, dst as bytes; n = elements, a block multiple). ---
using DequantizeFn = void (*)(const uint8_t* src, float* dst, int64_t n);
using QuantizeFn = void (*)(const float* src, uint8_t* dst, int64_t n);
using DotFn = float (*)(const uint8_t* w, const uint8_t* x, int64_t n);

// quant_float.cc
void DequantizeF32(const uint8_t* src, float* dst, int64_t n);
void DequantizeF16(const uint8_t* src, float* dst, int64_t n);
void DequantizeBf16(const uint8_t* src, float* dst, int64_t n);
void QuantizeF32(const float* src, uint8_t* dst, int64_t n);
void QuantizeF16(const float* src, uint8_t* dst, int64_t n);
void QuantizeBf16(const float* src, uint8_t* dst, int64_t n);
float DotF32(const uint8_t* w, const uint8_t* x, int64_t n);
float DotF16(const uint8_t* w, const uint8_t* x, int64_t n);
float DotBf16(const uint8_t* w, const uint8_t* x, int64_t n);

// quant_legacy.cc
void DequantizeQ4_0(const uint8_t* src, float* dst, int64_t n);
void DequantizeQ4_1(const uint8_t* src, float* dst, int64_t n);
void DequantizeQ5_0(const uint8_t* src, float* dst, int64_t n);
void DequantizeQ5_1(const uint8_t* src, float* dst, int64_t n);
void DequantizeQ8_0(const uint8_t* src, float* dst, int64_t n);
void DequantizeQ8_1(const uint8_t* src, float* dst, int64_t n);
void QuantizeWeightQ4_0(const float* src, uint8_t* dst, int64_t n);
void QuantizeWeightQ4_1(const float* src, uint8_t* dst, int64_t n);
void QuantizeWeightQ5_0(const float* src, uint8_t* dst, int64_t n);
void QuantizeWeightQ5_1(const float* src, uint8_t* dst, int64_t n);
void QuantizeWeightQ8_0(const float* src, uint8_t* dst, int64_t n);
void QuantizeWeightQ8_1(const float* src, uint8_t* dst, int64_t n);
void QuantizeActQ8_0(const float* src, uint8_t* dst, int64_t n);
void QuantizeActQ8_1(const float* src, uint8_t* dst, int64_t n);
float DotQ4_0(const uint8_t* w, const uint8_t* x, int64_t n);
float DotQ4_1(const uint8_t* w, const uint8_t* x, int64_t n);
float DotQ5_0(const uint8_t* w, const uint8_t* x, int64_t n);
float DotQ5_1(const uint8_t* w, const uint8_t* x, int64_t n);
float DotQ8_0(const uint8_t* w, const uint8_t* x, int64_t n);
float DotQ8_1(const uint8_t* w, const uint8_t* x, int64_t n);

// quant_mxfp4.cc
void DequantizeMxfp4(const uint8_t* src, float* dst, int64_t n);
void QuantizeWeightMxfp4(const float* src, uint8_t* dst, int64_t n);
float DotMxfp4(const uint8_t* w, const uint8_t* x, int64_t n);

// quant_k.cc
void DequantizeQ2_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeQ3_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeQ4_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeQ5_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeQ6_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeQ8_K(const uint8_t* src, float* dst, int64_t n);
void QuantizeQ8_K(const float* src, uint8_t* dst, int64_t n);
float DotQ2_K(const uint8_t* w, const uint8_t* x, int64_t n);
float DotQ3_K(const uint8_t* w, const uint8_t* x, int64_t n);
float DotQ4_K(const uint8_t* w, const uint8_t* x, int64_t n);
float DotQ5_K(const uint8_t* w, const uint8_t* x, int64_t n);
float DotQ6_K(const uint8_t* w, const uint8_t* x, int64_t n);
float DotQ8_K(const uint8_t* w, const uint8_t* x, int64_t n);

// quant_k_quantize.cc (ggml's quantize_row_q*_K_ref, with its iterative scale searches)
void QuantizeWeightQ2_K(const float* src, uint8_t* dst, int64_t n);
void QuantizeWeightQ3_K(const float* src, uint8_t* dst, int64_t n);
void QuantizeWeightQ4_K(const float* src, uint8_t* dst, int64_t n);
void QuantizeWeightQ5_K(const float* src, uint8_t* dst, int64_t n);
void QuantizeWeightQ6_K(const float* src, uint8_t* dst, int64_t n);

}  // namespace shoal::kernels::internal
