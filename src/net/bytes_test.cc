// ByteWriter/ByteReader tests: little-endian bytes, round trips, truncation and limits.
#include "net/bytes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace shoal::net {
namespace {

using ::testing::HasSubstr;

TEST(BytesTest, WriterEmitsLittleEndian) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.U8(0xAB);
  w.U16(0x0102);
  w.U32(0x03040506);
  w.U64(0x0708090A0B0C0D0Eull);
  w.F32(1.0f);  // 0x3F800000
  w.String("hi");
  const std::vector<uint8_t> expected = {0xAB, 0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0x0E, 0x0D,
                                         0x0C, 0x0B, 0x0A, 0x09, 0x08, 0x07, 0x00, 0x00, 0x80,
                                         0x3F, 0x02, 0x00, 0x00, 0x00, 'h',  'i'};
  EXPECT_EQ(out, expected);
}

TEST(BytesTest, RoundTrip) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  const std::vector<float> floats = {0.0f, -1.5f, 3.25e-7f, 65504.0f};
  const std::vector<uint32_t> ids = {1, 0xFFFFFFFFu, 42};
  const uint8_t nonce[3] = {9, 8, 7};
  w.U8(7);
  w.U16(65535);
  w.U32(123456789);
  w.U64(~0ull);
  w.F32(-0.0f);
  w.String("layer 12");
  w.String("");
  w.F32Array(floats);
  w.U32Array(ids);
  w.Bytes(nonce);

  ByteReader r(out);
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  float f;
  std::string s1, s2;
  std::vector<float> fa;
  std::vector<uint32_t> ua;
  uint8_t raw[3];
  ASSERT_TRUE(r.U8(&u8).ok());
  ASSERT_TRUE(r.U16(&u16).ok());
  ASSERT_TRUE(r.U32(&u32).ok());
  ASSERT_TRUE(r.U64(&u64).ok());
  ASSERT_TRUE(r.F32(&f).ok());
  ASSERT_TRUE(r.String(&s1, 100).ok());
  ASSERT_TRUE(r.String(&s2, 100).ok());
  ASSERT_TRUE(r.F32Array(&fa, 100).ok());
  ASSERT_TRUE(r.U32Array(&ua, 100).ok());
  ASSERT_TRUE(r.Bytes(raw).ok());
  EXPECT_TRUE(r.ExpectEnd().ok());
  EXPECT_EQ(u8, 7);
  EXPECT_EQ(u16, 65535);
  EXPECT_EQ(u32, 123456789u);
  EXPECT_EQ(u64, ~0ull);
  EXPECT_TRUE(std::signbit(f));
  EXPECT_EQ(s1, "layer 12");
  EXPECT_EQ(s2, "");
  EXPECT_EQ(fa, floats);
  EXPECT_EQ(ua, ids);
  EXPECT_EQ(raw[2], 7);
}

TEST(BytesTest, TruncationIsAnErrorAndDoesNotAdvance) {
  const std::vector<uint8_t> three = {1, 2, 3};
  ByteReader r(three);
  uint32_t v = 0;
  const Status s = r.U32(&v, "epoch");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("truncated epoch: needs 4 bytes at offset 0, 3 left"));
  EXPECT_EQ(r.offset(), 0u);
  uint16_t h = 0;
  EXPECT_TRUE(r.U16(&h).ok());
  EXPECT_THAT(r.ExpectEnd("body").message(), HasSubstr("1 unexpected trailing bytes"));
}

TEST(BytesTest, LengthPrefixesCheckedAgainstLimitAndData) {
  std::vector<uint8_t> out;
  ByteWriter(&out).String("abcdef");
  std::string s;
  ByteReader over(out);
  EXPECT_THAT(over.String(&s, 5, "name").message(), HasSubstr("length 6 exceeds the limit 5"));
  EXPECT_EQ(over.offset(), 0u);

  // A count claiming more elements than bytes left (a hostile length) fails without allocating.
  std::vector<uint8_t> lying;
  ByteWriter(&lying).U32(1000000);
  lying.resize(lying.size() + 8);
  std::vector<float> fa;
  ByteReader r(lying);
  EXPECT_THAT(r.F32Array(&fa, 1u << 30, "hidden").message(), HasSubstr("truncated hidden"));
  EXPECT_TRUE(fa.empty());
  EXPECT_EQ(r.offset(), 0u);
}

}  // namespace
}  // namespace shoal::net
