// DType table tests: ids, names and block geometry match ggml's.
#include "tensor/dtype.h"

#include <gtest/gtest.h>

namespace shoal {
namespace {

TEST(DTypeTest, BlockBytesMatchGgml) {
  EXPECT_EQ(Info(DType::kQ4_0).block_bytes, 18);
  EXPECT_EQ(Info(DType::kQ8_0).block_bytes, 34);
  EXPECT_EQ(Info(DType::kQ2_K).block_bytes, 84);
  EXPECT_EQ(Info(DType::kQ3_K).block_bytes, 110);
  EXPECT_EQ(Info(DType::kQ4_K).block_bytes, 144);
  EXPECT_EQ(Info(DType::kQ5_K).block_bytes, 176);
  EXPECT_EQ(Info(DType::kQ6_K).block_bytes, 210);
  EXPECT_EQ(Info(DType::kQ8_K).block_bytes, 292);
  EXPECT_EQ(Info(DType::kMXFP4).block_bytes, 17);
}

TEST(DTypeTest, RowBytes) {
  EXPECT_EQ(RowBytes(DType::kQ4_0, 64), 36u);
  EXPECT_FALSE(RowBytes(DType::kQ4_0, 33).has_value());
  EXPECT_FALSE(RowBytes(DType::kF32, -1).has_value());
  EXPECT_EQ(RowBytes(DType::kF32, 5), 20u);
}

TEST(DTypeTest, Names) {
  EXPECT_EQ(DTypeFromName("Q4_K"), DType::kQ4_K);
  EXPECT_FALSE(DTypeFromName("q9_9").has_value());
  EXPECT_FALSE(GetDTypeInfo(4).has_value());  // removed Q4_2
  EXPECT_EQ(GetDTypeInfo(30)->type, DType::kBF16);
}

}  // namespace
}  // namespace shoal
