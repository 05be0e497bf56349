// Tensor element types with their GGUF/ggml ids and quant block geometry.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace shoal {

// Values are the ggml_type ids stored in GGUF files; never renumber.
enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  kMXFP4 = 39,
};

struct DTypeInfo {
  DType type;
  std::string_view name;  // ggml's lower-case name, e.g. "q4_k"
  int64_t block_size;     // elements per block (1 for plain types)
  int64_t block_bytes;    // bytes per block
};

// Info for a known type, or nullopt for an id Shoal does not support.
std::optional<DTypeInfo> GetDTypeInfo(uint32_t ggml_type_id);
const DTypeInfo& Info(DType t);
std::string_view DTypeName(DType t);
std::optional<DType> DTypeFromName(std::string_view name);  // case-insensitive

// Bytes of one row of n elements; nullopt if n is not a multiple of the block size or overflows.
std::optional<uint64_t> RowBytes(DType t, int64_t n);

}  // namespace shoal
