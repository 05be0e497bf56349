// gguf::Value tests: rendering, type strings, numeric conversions and equality.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gguf/gguf.h"

namespace shoal::gguf {
namespace {

TEST(ValueTest, TypeNames) {
  EXPECT_STREQ(ValueTypeName(ValueType::kU8), "u8");
  EXPECT_STREQ(ValueTypeName(ValueType::kString), "string");
  EXPECT_STREQ(ValueTypeName(ValueType::kF64), "f64");
  EXPECT_STREQ(ValueTypeName(static_cast<ValueType>(99)), "unknown");
}

TEST(ValueTest, ScalarToString) {
  EXPECT_EQ(Value::U8(200).ToString(), "200");
  EXPECT_EQ(Value::I8(-5).ToString(), "-5");
  EXPECT_EQ(Value::U64(18446744073709551615u).ToString(), "18446744073709551615");
  EXPECT_EQ(Value::I64(std::numeric_limits<int64_t>::min()).ToString(), "-9223372036854775808");
  EXPECT_EQ(Value::F32(1e-5f).ToString(), "1e-05");
  EXPECT_EQ(Value::F32(0.1f).ToString(), "0.1");
  EXPECT_EQ(Value::F64(0.1).ToString(), "0.1");
  EXPECT_EQ(Value::F32(10000.0f).ToString(), "10000");
  EXPECT_EQ(Value::Bool(true).ToString(), "true");
  EXPECT_EQ(Value::Bool(false).ToString(), "false");
}

TEST(ValueTest, StringsAreQuotedAndEscaped) {
  EXPECT_EQ(Value::String("llama").ToString(), "\"llama\"");
  EXPECT_EQ(Value::String("a\"b\\c\nd\te\x01").ToString(), "\"a\\\"b\\\\c\\nd\\te\\x01\"");
  EXPECT_EQ(Value::String("\xe2\x96\x81the").ToString(), "\"\xe2\x96\x81the\"");  // UTF-8 kept
  EXPECT_EQ(Value::String("").ToString(), "\"\"");
}

TEST(ValueTest, ArraysAreShortened) {
  std::vector<Value> v;
  for (int k = 0; k < 10; ++k) v.push_back(Value::I32(k));
  const Value arr = Value::Array(ValueType::kI32, v);
  EXPECT_EQ(arr.ToString(3), "[0, 1, 2, ... 7 more]");
  EXPECT_EQ(arr.ToString(10), "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]");
  EXPECT_EQ(arr.ToString(0), "[... 10 more]");
  EXPECT_EQ(arr.TypeString(), "array[i32, 10]");
  EXPECT_EQ(Value::Array(ValueType::kString, {}).ToString(), "[]");
  EXPECT_EQ(Value::Array(ValueType::kString, {}).TypeString(), "array[string, 0]");
}

TEST(ValueTest, NestedArrays) {
  const Value inner = Value::Array(ValueType::kString, {Value::String("a"), Value::String("b")});
  const Value outer = Value::Array(ValueType::kArray, {inner, inner, inner});
  EXPECT_EQ(outer.ToString(2), "[[\"a\", \"b\"], [\"a\", \"b\"], ... 1 more]");
  EXPECT_EQ(outer.TypeString(), "array[array[string, 2], 3]");
}

TEST(ValueTest, Conversions) {
  EXPECT_TRUE(Value::U16(3).IsInteger());
  EXPECT_TRUE(Value::I64(3).IsInteger());
  EXPECT_FALSE(Value::Bool(true).IsInteger());
  EXPECT_FALSE(Value::F32(1).IsInteger());
  EXPECT_TRUE(Value::F32(1).IsFloat());
  EXPECT_FALSE(Value::String("1").IsFloat());
  EXPECT_EQ(Value::U32(7).AsInt(), 7);
  EXPECT_EQ(Value::I16(-7).AsInt(), -7);
  EXPECT_EQ(Value::Bool(true).AsInt(), 1);
  EXPECT_EQ(Value::F64(-2.9).AsInt(), -2);
  EXPECT_EQ(Value::U64(~uint64_t{0}).AsInt(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Value::F64(1e300).AsInt(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Value::F64(-1e300).AsInt(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Value::F64(std::nan("")).AsInt(), 0);
  EXPECT_EQ(Value::String("5").AsInt(), 0);
  EXPECT_DOUBLE_EQ(Value::F32(0.5f).AsDouble(), 0.5);
  EXPECT_DOUBLE_EQ(Value::I8(-3).AsDouble(), -3.0);
  EXPECT_DOUBLE_EQ(Value::U64(12).AsDouble(), 12.0);
  EXPECT_DOUBLE_EQ(Value::Bool(false).AsDouble(), 0.0);
}

TEST(ValueTest, Equality) {
  EXPECT_EQ(Value::U32(1), Value::U32(1));
  EXPECT_NE(Value::U32(1), Value::U64(1));
  EXPECT_NE(Value::U32(1), Value::U32(2));
  EXPECT_EQ(Value::F32(std::nanf("")), Value::F32(std::nanf("")));
  EXPECT_NE(Value::String("a"), Value::String("b"));
  EXPECT_EQ(Value::Array(ValueType::kI8, {Value::I8(1)}),
            Value::Array(ValueType::kI8, {Value::I8(1)}));
  EXPECT_NE(Value::Array(ValueType::kI8, {Value::I8(1)}), Value::Array(ValueType::kI8, {}));
  EXPECT_NE(Value::Array(ValueType::kI8, {}), Value::Array(ValueType::kU8, {}));
}

}  // namespace
}  // namespace shoal::gguf
