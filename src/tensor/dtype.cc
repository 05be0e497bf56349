// The table of supported element types (block sizes/bytes as in ggml.c's type_traits).
#include "tensor/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "base/check.h"

namespace shoal {
namespace {

constexpr int64_t kQK = 32;    // elements per "legacy" quant block
constexpr int64_t kQKK = 256;  // elements per K-quant super-block

constexpr std::array<DTypeInfo, 21> kTable = {{
    {DType::kF32, "f32", 1, 4},
    {DType::kF16, "f16", 1, 2},
    {DType::kQ4_0, "q4_0", kQK, 2 + kQK / 2},
    {DType::kQ4_1, "q4_1", kQK, 4 + kQK / 2},
    {DType::kQ5_0, "q5_0", kQK, 2 + 4 + kQK / 2},
    {DType::kQ5_1, "q5_1", kQK, 4 + 4 + kQK / 2},
    {DType::kQ8_0, "q8_0", kQK, 2 + kQK},
    {DType::kQ8_1, "q8_1", kQK, 4 + kQK},
    {DType::kQ2_K, "q2_k", kQKK, kQKK / 16 + kQKK / 4 + 4},
    {DType::kQ3_K, "q3_k", kQKK, kQKK / 8 + kQKK / 4 + 12 + 2},
    {DType::kQ4_K, "q4_k", kQKK, 4 + 12 + kQKK / 2},
    {DType::kQ5_K, "q5_k", kQKK, 4 + 12 + kQKK / 8 + kQKK / 2},
    {DType::kQ6_K, "q6_k", kQKK, kQKK / 2 + kQKK / 4 + kQKK / 16 + 2},
    {DType::kQ8_K, "q8_k", kQKK, 4 + kQKK + kQKK / 16 * 2},
    {DType::kI8, "i8", 1, 1},
    {DType::kI16, "i16", 1, 2},
    {DType::kI32, "i32", 1, 4},
    {DType::kI64, "i64", 1, 8},
    {DType::kF64, "f64", 1, 8},
    {DType::kBF16, "bf16", 1, 2},
    {DType::kMXFP4, "mxfp4", kQK, 1 + kQK / 2},
}};

}  // namespace

std::optional<DTypeInfo> GetDTypeInfo(uint32_t id) {
  for (const auto& e : kTable)
    if (static_cast<uint32_t>(e.type) == id) return e;
  return std::nullopt;
}

const DTypeInfo& Info(DType t) {
  for (const auto& e : kTable)
    if (e.type == t) return e;
  SHOAL_CHECK_MSG(false, "unknown DType");
  return kTable[0];
}

std::string_view DTypeName(DType t) { return Info(t).name; }

std::optional<DType> DTypeFromName(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& e : kTable)
    if (e.name == lower) return e.type;
  return std::nullopt;
}

std::optional<uint64_t> RowBytes(DType t, int64_t n) {
  const auto& info = Info(t);
  if (n < 0 || n % info.block_size != 0) return std::nullopt;
  const uint64_t blocks = static_cast<uint64_t>(n / info.block_size);
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info.block_bytes), &bytes))
    return std::nullopt;
  return bytes;
}

}  // namespace shoal
