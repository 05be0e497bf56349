// IEEE half and bfloat16 conversions, bit-exact with ggml's reference (round to nearest even).
#pragma once

#include <cstdint>
#include <cstring>

namespace shoal {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// F16 -> F32 (exact).
inline float Fp16ToFp32(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = BitsFloat(0x7800000u);  // 2^-112
  const float normalized = BitsFloat((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = BitsFloat((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result =
      sign | (two_w < denormalized_cutoff ? FloatBits(denormalized) : FloatBits(normalized));
  return BitsFloat(result);
}

// F32 -> F16, round to nearest even (the same bits as F16C's _cvtss_sh(x, 0)).
inline uint16_t Fp32ToFp16(float f) {
  const float scale_to_inf = BitsFloat(0x77800000u);   // 2^112
  const float scale_to_zero = BitsFloat(0x08800000u);  // 2^-110
  float base = (f < 0 ? -f : f) * scale_to_inf;
  base *= scale_to_zero;
  const uint32_t w = FloatBits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = BitsFloat((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = FloatBits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

inline float Bf16ToFp32(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

// F32 -> BF16 round to nearest even; NaN stays a quiet NaN.
inline uint16_t Fp32ToBf16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64);
  return static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

}  // namespace shoal
