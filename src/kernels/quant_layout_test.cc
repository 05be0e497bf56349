// Bit-level layout tests: hand-built GGUF blocks with known values must dequantize exactly, and
// the activation quantizers must round like llama.cpp's x86 backend (ties to even for Q8_0).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "kernels/quant.h"
#include "kernels/test_util.h"

namespace shoal::kernels {
namespace {

void PutHalf(uint8_t* p, float f) {
  const uint16_t h = Fp32ToFp16(f);
  std::memcpy(p, &h, 2);
}

std::vector<float> Deq(DType t, const std::vector<uint8_t>& blocks) {
  const int64_t n = static_cast<int64_t>(blocks.size()) / Info(t).block_bytes * Info(t).block_size;
  std::vector<float> out(static_cast<size_t>(n));
  Dequantize(t, blocks.data(), out.data(), n);
  return out;
}

TEST(QuantLayout, Q4_0LowNibblesAreTheFirstHalf) {
  std::vector<uint8_t> b(18);
  PutHalf(&b[0], 0.5f);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = Deq(DType::kQ4_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(y[16 + j], (15 - j - 8) * 0.5f) << j;
  }
}

TEST(QuantLayout, Q4_1ScaleAndMin) {
  std::vector<uint8_t> b(20);
  PutHalf(&b[0], 0.25f);
  PutHalf(&b[2], -1.0f);
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = Deq(DType::kQ4_1, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f - 1.0f);
    EXPECT_EQ(y[16 + j], j * 0.25f - 1.0f);
  }
}

TEST(QuantLayout, Q5_0FifthBitsFromQh) {
  std::vector<uint8_t> b(22);
  PutHalf(&b[0], 1.0f);
  const uint32_t qh = (1u << 3) | (1u << 20);  // element 3 and element 20 get +16
  std::memcpy(&b[2], &qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = Deq(DType::kQ5_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(j + (j == 3 ? 16 : 0) - 16)) << j;
    EXPECT_EQ(y[16 + j], static_cast<float>(j + (j == 4 ? 16 : 0) - 16)) << j;
  }
}

TEST(QuantLayout, Q5_1FifthBitsFromQh) {
  std::vector<uint8_t> b(24);
  PutHalf(&b[0], 2.0f);
  PutHalf(&b[2], 0.5f);
  const uint32_t qh = 0x80000001u;  // elements 0 and 31
  std::memcpy(&b[4], &qh, 4);
  for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>(15 | (1 << 4));
  const auto y = Deq(DType::kQ5_1, b);
  EXPECT_EQ(y[0], 31 * 2.0f + 0.5f);
  EXPECT_EQ(y[1], 15 * 2.0f + 0.5f);
  EXPECT_EQ(y[16], 1 * 2.0f + 0.5f);
  EXPECT_EQ(y[31], 17 * 2.0f + 0.5f);
}

TEST(QuantLayout, Q8_0AndQ8_1) {
  std::vector<uint8_t> b(34), c(36);
  PutHalf(&b[0], 0.125f);
  PutHalf(&c[0], 0.125f);
  for (int j = 0; j < 32; ++j) {
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
    c[4 + j] = b[2 + j];
  }
  const auto y = Deq(DType::kQ8_0, b), z = Deq(DType::kQ8_1, c);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], (j * 8 - 128) * 0.125f);
    EXPECT_EQ(z[j], y[j]);
  }
}

TEST(QuantLayout, Mxfp4CodesAndE8m0) {
  std::vector<uint8_t> b(17);
  b[0] = 130;  // 2^(130 - 128) = 4 times the doubled E2M1 value
  for (int j = 0; j < 16; ++j) b[1 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const int kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const auto y = Deq(DType::kMXFP4, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], kv[j] * 4.0f);
    EXPECT_EQ(y[16 + j], kv[15 - j] * 4.0f);
  }
  b[0] = 1;  // a subnormal scale, 2^-127
  EXPECT_EQ(Deq(DType::kMXFP4, b)[1], std::ldexp(1.0f, -127));
}

// K-quants: build each super-block element by element from ggml's documented bit positions.

TEST(QuantLayout, Q2_K) {
  std::vector<uint8_t> b(84, 0);
  for (int j = 0; j < 16; ++j) b[j] = static_cast<uint8_t>((j % 16) | ((15 - j) << 4));
  PutHalf(&b[80], 0.5f);
  PutHalf(&b[82], 0.25f);
  std::array<int, 256> q{};
  for (int e = 0; e < 256; ++e) {
    q[e] = (e * 7 + 1) % 4;
    // Element e: half h, 2-bit group k, byte l of the half: qs[32 h + l] bits 2k.
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    b[16 + 32 * h + l] = static_cast<uint8_t>(b[16 + 32 * h + l] | (q[e] << (2 * k)));
  }
  const auto y = Deq(DType::kQ2_K, b);
  for (int e = 0; e < 256; ++e) {
    const int sc = e / 16;
    EXPECT_EQ(y[e], 0.5f * (sc % 16) * q[e] - 0.25f * (15 - sc)) << e;
  }
}

TEST(QuantLayout, Q3_K) {
  std::vector<uint8_t> b(110, 0);
  std::array<int, 16> scale{};
  for (int j = 0; j < 16; ++j) {
    scale[j] = j * 4 - 32 + (j % 3);  // 6-bit signed, stored + 32
    const int s = scale[j] + 32;
    // Low 4 bits: bytes 0..7 (j < 8: low nibble of byte j, else high nibble of byte j - 8);
    // high 2 bits: byte 8 + j % 4, bits 2 * (j / 4).
    if (j < 8)
      b[96 + j] |= static_cast<uint8_t>(s & 0xF);
    else
      b[96 + j - 8] |= static_cast<uint8_t>((s & 0xF) << 4);
    b[96 + 8 + j % 4] |= static_cast<uint8_t>((s >> 4) << (2 * (j / 4)));
  }
  PutHalf(&b[108], 0.5f);
  std::array<int, 256> q{};
  for (int e = 0; e < 256; ++e) {
    q[e] = (e * 5 + 3) % 8 - 4;  // -4..3
    const int u = q[e] + 4;
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    b[32 + 32 * h + l] |= static_cast<uint8_t>((u & 3) << (2 * k));
    if (u & 4) b[l] |= static_cast<uint8_t>(1 << (e / 32));  // hmask[e % 32] bit e / 32
  }
  const auto y = Deq(DType::kQ3_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * scale[e / 16] * q[e]) << e;
}

// Q4_K/Q5_K 6-bit scales and mins: j < 4 in bytes j and j + 4; j >= 4 split over byte j + 4
// (low nibbles) and the top 2 bits of bytes j - 4 (scale) and j (min).
void PutScaleMinK4(uint8_t* s, int j, int sc, int m) {
  if (j < 4) {
    s[j] |= static_cast<uint8_t>(sc);
    s[j + 4] |= static_cast<uint8_t>(m);
  } else {
    s[j + 4] |= static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
    s[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
    s[j] |= static_cast<uint8_t>((m >> 4) << 6);
  }
}

TEST(QuantLayout, Q4_K) {
  std::vector<uint8_t> b(144, 0);
  PutHalf(&b[0], 0.5f);
  PutHalf(&b[2], 0.25f);
  for (int j = 0; j < 8; ++j) PutScaleMinK4(&b[4], j, 63 - 5 * j, 3 + 7 * j);
  std::array<int, 256> q{};
  for (int e = 0; e < 256; ++e) {
    q[e] = (e * 11 + 2) % 16;
    // 64-element group g uses qs[32 g ..]: low nibbles for its first 32 elements.
    const int g = e / 64, r = e % 64;
    b[16 + 32 * g + r % 32] |= static_cast<uint8_t>(r < 32 ? q[e] : q[e] << 4);
  }
  const auto y = Deq(DType::kQ4_K, b);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32;
    EXPECT_EQ(y[e], 0.5f * (63 - 5 * j) * q[e] - 0.25f * (3 + 7 * j)) << e;
  }
}

TEST(QuantLayout, Q5_K) {
  std::vector<uint8_t> b(176, 0);
  PutHalf(&b[0], 0.5f);
  PutHalf(&b[2], 0.25f);
  for (int j = 0; j < 8; ++j) PutScaleMinK4(&b[4], j, 1 + 8 * j, 60 - 3 * j);
  std::array<int, 256> q{};
  for (int e = 0; e < 256; ++e) {
    q[e] = (e * 13 + 5) % 32;
    const int g = e / 64, r = e % 64;
    b[48 + 32 * g + r % 32] |= static_cast<uint8_t>(r < 32 ? (q[e] & 15) : (q[e] & 15) << 4);
    if (q[e] & 16) b[16 + e % 32] |= static_cast<uint8_t>(1 << (e / 32));  // qh[e % 32]
  }
  const auto y = Deq(DType::kQ5_K, b);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32;
    EXPECT_EQ(y[e], 0.5f * (1 + 8 * j) * q[e] - 0.25f * (60 - 3 * j)) << e;
  }
}

TEST(QuantLayout, Q6_K) {
  std::vector<uint8_t> b(210, 0);
  for (int j = 0; j < 16; ++j) b[192 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 17 - 128));
  PutHalf(&b[208], 0.5f);
  std::array<int, 256> q{};
  for (int e = 0; e < 256; ++e) {
    q[e] = (e * 29 + 7) % 64 - 32;
    const int u = q[e] + 32;
    // Half h, quarter k, byte l: nibble of ql[64 h + l + 32 (k & 1)] (low for k < 2), bits 4-5
    // in qh[32 h + l] at 2k.
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    b[64 * h + l + 32 * (k & 1)] |= static_cast<uint8_t>(k < 2 ? (u & 15) : (u & 15) << 4);
    b[128 + 32 * h + l] |= static_cast<uint8_t>((u >> 4) << (2 * k));
  }
  const auto y = Deq(DType::kQ6_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * (e / 16 * 17 - 128) * q[e]) << e;
}

TEST(QuantLayout, Q8_KDequantizeAndQuantize) {
  std::vector<float> x(256);
  for (int e = 0; e < 256; ++e) x[e] = static_cast<float>((e % 9) - 4) * 0.25f;
  x[100] = -2.0f;  // the value of largest magnitude is negative: iscale = -127 / -2 = 63.5
  std::vector<uint8_t> b(292);
  Quantize(DType::kQ8_K, x.data(), b.data(), 256);
  float d;
  std::memcpy(&d, &b[0], 4);
  EXPECT_EQ(d, 1 / 63.5f);
  const int8_t* qs = reinterpret_cast<const int8_t*>(&b[4]);
  EXPECT_EQ(qs[100], -127);
  for (int e = 0; e < 256; ++e) {
    if (e == 100) continue;
    // 63.5 * 0.25 k = 15.875 k; nearest, ties to even (none here).
    EXPECT_EQ(qs[e], static_cast<int8_t>(std::nearbyint(63.5f * x[e]))) << e;
  }
  for (int j = 0; j < 16; ++j) {
    int16_t bsum;
    std::memcpy(&bsum, &b[260 + 2 * j], 2);
    int sum = 0;
    for (int e = 16 * j; e < 16 * j + 16; ++e) sum += qs[e];
    EXPECT_EQ(bsum, sum);
  }
  const auto y = Deq(DType::kQ8_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], d * qs[e]);
}

// Q8_0 activations: amax = 127 gives id = 127 / amax = 1 exactly, so x itself is rounded; ties
// go to even on the AVX path, away from zero in ggml's scalar reference.
TEST(QuantLayout, Q8_0ActivationTiesToEven) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = 0.5f;
  x[5] = -126.5f;
  std::vector<uint8_t> act(34), act_ref(34), weight(34);
  Quantize(DType::kQ8_0, x.data(), act.data(), 32);
  ref::Quantize(DType::kQ8_0, x.data(), act_ref.data(), 32);
  QuantizeWeights(DType::kQ8_0, x.data(), weight.data(), 32);
  EXPECT_EQ(act, act_ref);
  const int8_t* q = reinterpret_cast<const int8_t*>(&act[2]);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], 2);
  EXPECT_EQ(q[2], 4);
  EXPECT_EQ(q[3], -2);
  EXPECT_EQ(q[4], 0);
  EXPECT_EQ(q[5], -126);
  const int8_t* w = reinterpret_cast<const int8_t*>(&weight[2]);
  EXPECT_EQ(w[1], 3);
  EXPECT_EQ(w[3], -3);
  EXPECT_EQ(w[5], -127);
  uint16_t d;
  std::memcpy(&d, &act[0], 2);
  EXPECT_EQ(d, Fp32ToFp16(1.0f));
}

TEST(QuantLayout, Q8_0ActivationZeroBlock) {
  std::vector<float> x(64, 0.0f);
  x[40] = -3.0f;
  std::vector<uint8_t> act(68, 0xAB);
  Quantize(DType::kQ8_0, x.data(), act.data(), 64);
  for (int j = 0; j < 34; ++j) EXPECT_EQ(act[j], 0) << j;
  EXPECT_EQ(static_cast<int8_t>(act[34 + 2 + 8]), -127);
}

// Q8_1 activations also carry s = fp16(d * sum(q)) with the unrounded d = amax / 127.
TEST(QuantLayout, Q8_1ActivationSum) {
  auto x = testing::RandomFloats(32, 7);
  std::vector<uint8_t> b(36);
  Quantize(DType::kQ8_1, x.data(), b.data(), 32);
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  int sum = 0;
  for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(b[4 + j]);
  uint16_t d, s;
  std::memcpy(&d, &b[0], 2);
  std::memcpy(&s, &b[2], 2);
  EXPECT_EQ(d, Fp32ToFp16(amax / 127.f));
  EXPECT_EQ(s, Fp32ToFp16(amax / 127.f * static_cast<float>(sum)));
}

TEST(QuantLayout, F16AndBf16RoundToNearestEven) {
  const float x[4] = {1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11),
                      1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8)};
  uint16_t h[4], b[4];
  Quantize(DType::kF16, x, h, 4);
  Quantize(DType::kBF16, x, b, 4);
  EXPECT_EQ(h[0], 0x3C00);  // tie -> even (1.0)
  EXPECT_EQ(h[1], 0x3C02);  // tie -> even (1 + 2^-9)
  EXPECT_EQ(b[2], 0x3F80);
  EXPECT_EQ(b[3], 0x3F82);
  float y[4];
  Dequantize(DType::kF16, h, y, 4);
  EXPECT_EQ(y[1], 1.0f + std::ldexp(1.0f, -9));
}

TEST(QuantLayout, VecDotTypes) {
  EXPECT_EQ(VecDotType(DType::kF32), DType::kF32);
  EXPECT_EQ(VecDotType(DType::kF16), DType::kF16);
  EXPECT_EQ(VecDotType(DType::kBF16), DType::kBF16);
  for (DType t : {DType::kQ4_0, DType::kQ5_0, DType::kQ8_0, DType::kMXFP4})
    EXPECT_EQ(VecDotType(t), DType::kQ8_0);
  for (DType t : {DType::kQ4_1, DType::kQ5_1}) EXPECT_EQ(VecDotType(t), DType::kQ8_1);
  for (DType t : {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K})
    EXPECT_EQ(VecDotType(t), DType::kQ8_K);
  EXPECT_FALSE(IsSupportedWeightType(DType::kI32));
  EXPECT_TRUE(IsSupportedWeightType(DType::kMXFP4));
  EXPECT_TRUE(QuantizeSupported(DType::kQ3_K));
}

}  // namespace
}  // namespace shoal::kernels
