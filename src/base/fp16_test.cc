// F16/BF16 conversion tests: exhaustive round trip of every half value.
#include "base/fp16.h"

#include <gtest/gtest.h>

#include <cmath>

namespace shoal {
namespace {

TEST(Fp16Test, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(Fp32ToFp16(f), h) << h;
  }
}

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3C00);
  EXPECT_EQ(Fp32ToFp16(-2.0f), 0xC000);
  EXPECT_EQ(Fp32ToFp16(65504.0f), 0x7BFF);
  EXPECT_EQ(Fp32ToFp16(1e6f), 0x7C00);  // overflow -> inf
  EXPECT_FLOAT_EQ(Fp16ToFp32(0x3555), 0.333251953125f);
  // Round half to even: 1 + 2^-11 is exactly between 1 and 1+2^-10.
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
}

TEST(Bf16Test, RoundNearestEven) {
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3F80);
  EXPECT_FLOAT_EQ(Bf16ToFp32(0x3F80), 1.0f);
  EXPECT_EQ(Fp32ToBf16(BitsFloat(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(Fp32ToBf16(BitsFloat(0x3F818000u)), 0x3F82);  // tie -> even (up)
}

}  // namespace
}  // namespace shoal
