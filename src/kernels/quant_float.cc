// Reference kernels of the plain float formats F32, F16 and BF16: conversion and dot products.
#include <cstring>

#include "kernels/quant_internal.h"

namespace shoal::kernels::internal {

void DequantizeF32(const uint8_t* src, float* dst, int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
}

void DequantizeF16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = LoadHalf(src + 2 * i);
}

void DequantizeBf16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(LoadU16(src + 2 * i));
}

void QuantizeF32(const float* src, uint8_t* dst, int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
}

// Round to nearest even, as ggml_fp32_to_fp16_row and F16C's _mm256_cvtps_ph(x, 0) do.
void QuantizeF16(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) StoreHalf(dst + 2 * i, src[i]);
}

void QuantizeBf16(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) StoreU16(dst + 2 * i, Fp32ToBf16(src[i]));
}

namespace {

// Shared scalar loop: lane i % 32 accumulates load(w, i) * load(x, i) (no fused multiply-add,
// so every SIMD target reproduces it), then the canonical fold.
template <typename Load>
float DotLanes(const uint8_t* w, const uint8_t* x, int64_t n, Load load) {
  float lanes[kFloatLanes] = {};
  for (int64_t i = 0; i < n; ++i) lanes[i % kFloatLanes] += load(w, i) * load(x, i);
  return SumFloatLanes(lanes);
}

}  // namespace

float DotF32(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotLanes(w, x, n, [](const uint8_t* p, int64_t i) { return LoadF32(p + 4 * i); });
}

// F16 x F16 products are exact in F32 (11-bit significands), so only the sum order matters.
float DotF16(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotLanes(w, x, n, [](const uint8_t* p, int64_t i) { return LoadHalf(p + 2 * i); });
}

float DotBf16(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotLanes(w, x, n,
                  [](const uint8_t* p, int64_t i) { return Bf16ToFp32(LoadU16(p + 2 * i)); });
}

}  // namespace shoal::kernels::internal
