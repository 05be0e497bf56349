// GGUF v2/v3 parser over one mapped file: header, metadata, tensor infos, fully validated.
#include "gguf/reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string_view>

namespace shoal::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF files are little-endian");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxValueType = static_cast<uint32_t>(ValueType::kF64);
constexpr uint64_t kMaxAlignment = uint64_t{1} << 31;  // ggml stores the alignment as a u32
// Smallest encodings, used to reject counts that cannot fit in the remaining bytes before
// allocating anything: a key/value is key length (8) + type (4) + a 1-byte value; a tensor info is
// name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
// Containers grow as entries are actually parsed; a count is trusted only this far up front, so
// that a corrupt count in a large file cannot make us reserve gigabytes.
constexpr uint64_t kMaxReserve = 4096;

// Bytes one array element of type `t` needs at least (elem type + count for nested arrays).
uint64_t MinElemBytes(ValueType t) {
  switch (t) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kBool:
      return 1;
    case ValueType::kU16:
    case ValueType::kI16:
      return 2;
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kF32:
      return 4;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64:
    case ValueType::kString:
      return 8;
    case ValueType::kArray:
      return 4 + 8;
  }
  return 1;
}

// ggml's name for a type id Shoal cannot read (for messages), or "" if the id is not ggml's.
std::string_view UnsupportedGgmlTypeName(uint32_t id) {
  switch (id) {
    case 4:
      return "q4_2 (removed from ggml)";
    case 5:
      return "q4_3 (removed from ggml)";
    case 16:
      return "iq2_xxs";
    case 17:
      return "iq2_xs";
    case 18:
      return "iq3_xxs";
    case 19:
      return "iq1_s";
    case 20:
      return "iq4_nl";
    case 21:
      return "iq3_s";
    case 22:
      return "iq2_s";
    case 23:
      return "iq4_xs";
    case 29:
      return "iq1_m";
    case 31:
      return "q4_0_4_4 (removed from ggml)";
    case 32:
      return "q4_0_4_8 (removed from ggml)";
    case 33:
      return "q4_0_8_8 (removed from ggml)";
    case 34:
      return "tq1_0";
    case 35:
      return "tq2_0";
    default:
      return "";
  }
}

}  // namespace

std::string Printable(const std::string& s) {
  constexpr size_t kMaxShown = 100;
  std::string out;
  for (size_t k = 0; k < s.size() && k < kMaxShown; ++k) {
    const auto c = static_cast<unsigned char>(s[k]);
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMaxShown) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

Parser::Parser(std::string path, const uint8_t* data, uint64_t size, uint64_t max_values)
    : path_(std::move(path)), data_(data), size_(size), max_values_(max_values) {}

Status Parser::Fail(const std::string& what) const {
  std::string where = ctx_;
  for (uint64_t k : elem_path_) where += fmt::format("[{}]", k);
  if (where.empty()) return Errorf("{}: {}", path_, what);
  return Errorf("{}: {}: {}", path_, where, what);
}

Status Parser::Need(uint64_t n, const char* what) const {
  if (n <= size_ - pos_) return Status::Ok();
  return Fail(fmt::format("file ends inside the {} at offset {} (needs {} bytes, {} left)", what,
                          pos_, n, size_ - pos_));
}

Status Parser::ReadBytes(void* out, uint64_t n, const char* what) {
  SHOAL_RETURN_IF_ERROR(Need(n, what));
  std::memcpy(out, data_ + pos_, n);
  pos_ += n;
  return Status::Ok();
}

Status Parser::ReadString(std::string* out, const char* what) {
  uint64_t len = 0;
  const uint64_t at = pos_;
  SHOAL_RETURN_IF_ERROR(ReadPod(&len, what));
  if (len > size_ - pos_) {
    return Fail(fmt::format("{} at offset {} has length {} but only {} bytes are left", what, at,
                            len, size_ - pos_));
  }
  out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
  pos_ += len;
  return Status::Ok();
}

Status Parser::CountValue() {
  if (n_values_ < max_values_) {
    ++n_values_;
    return Status::Ok();
  }
  return Fail(fmt::format("metadata holds more than {} values (limit)", max_values_));
}

Status Parser::ReadValueType(ValueType* t, const char* what) {
  uint32_t id = 0;
  const uint64_t at = pos_;
  SHOAL_RETURN_IF_ERROR(ReadPod(&id, what));
  if (id > kMaxValueType) {
    return Fail(
        fmt::format("unknown {} {} at offset {} (valid: 0..{})", what, id, at, kMaxValueType));
  }
  *t = static_cast<ValueType>(id);
  return Status::Ok();
}

Status Parser::ReadValue(ValueType type, int depth, Value* out) {
  SHOAL_RETURN_IF_ERROR(CountValue());
  out->type = type;
  switch (type) {
    case ValueType::kU8:
      return ReadScalar<uint8_t>(&out->u);
    case ValueType::kU16:
      return ReadScalar<uint16_t>(&out->u);
    case ValueType::kU32:
      return ReadScalar<uint32_t>(&out->u);
    case ValueType::kU64:
      return ReadScalar<uint64_t>(&out->u);
    case ValueType::kI8:
      return ReadScalar<int8_t>(&out->i);
    case ValueType::kI16:
      return ReadScalar<int16_t>(&out->i);
    case ValueType::kI32:
      return ReadScalar<int32_t>(&out->i);
    case ValueType::kI64:
      return ReadScalar<int64_t>(&out->i);
    case ValueType::kF32:
      return ReadScalar<float>(&out->f);
    case ValueType::kF64:
      return ReadScalar<double>(&out->f);
    case ValueType::kBool: {
      uint8_t b = 0;
      const uint64_t at = pos_;
      SHOAL_RETURN_IF_ERROR(ReadPod(&b, "bool value"));
      if (b > 1) return Fail(fmt::format("bool value at offset {} is {} (must be 0 or 1)", at, b));
      out->b = b != 0;
      return Status::Ok();
    }
    case ValueType::kString:
      return ReadString(&out->str, "string value");
    case ValueType::kArray:
      return ReadArray(depth, out);
  }
  return Fail("unreachable value type");
}

Status Parser::ReadArray(int depth, Value* out) {
  if (depth >= kMaxArrayDepth) {
    return Fail(
        fmt::format("arrays nested deeper than {} levels at offset {}", kMaxArrayDepth, pos_));
  }
  SHOAL_RETURN_IF_ERROR(ReadValueType(&out->elem_type, "array element type"));
  uint64_t n = 0;
  const uint64_t at = pos_;
  SHOAL_RETURN_IF_ERROR(ReadPod(&n, "array length"));
  const uint64_t min_bytes = MinElemBytes(out->elem_type);
  if (n > (size_ - pos_) / min_bytes) {
    return Fail(fmt::format(
        "array length {} at offset {} cannot fit: {} elements of {} need at least {} bytes each "
        "but only {} bytes are left",
        n, at, n, ValueTypeName(out->elem_type), min_bytes, size_ - pos_));
  }
  if (n > max_values_ - n_values_) {
    return Fail(fmt::format("array length {} at offset {} exceeds the limit of {} metadata values",
                            n, at, max_values_));
  }
  out->arr.reserve(std::min(n, kMaxReserve));
  elem_path_.push_back(0);
  for (uint64_t k = 0; k < n; ++k) {
    elem_path_.back() = k;
    SHOAL_RETURN_IF_ERROR(ReadValue(out->elem_type, depth + 1, &out->arr.emplace_back()));
  }
  elem_path_.pop_back();
  return Status::Ok();
}

Status Parser::ReadHeader(SingleFile* out) {
  ctx_ = "header";
  if (size_ < 4) return Fail(fmt::format("too small to be a GGUF file ({} bytes)", size_));
  uint32_t magic = 0;
  SHOAL_RETURN_IF_ERROR(ReadPod(&magic, "magic"));
  if (magic != kMagic) {
    return Fail(
        fmt::format("not a GGUF file (starts with bytes {:02x} {:02x} {:02x} {:02x}, "
                    "expected 'GGUF')",
                    data_[0], data_[1], data_[2], data_[3]));
  }
  SHOAL_RETURN_IF_ERROR(ReadPod(&out->version, "version"));
  if (out->version == 1) {
    return Fail("GGUF version 1 is not supported (only versions 2 and 3); re-convert the model");
  }
  if (out->version != 2 && out->version != 3) {
    if ((out->version & 0xffff) == 0 && __builtin_bswap32(out->version) <= 3) {
      return Fail(
          fmt::format("version field {:#x} looks byte-swapped: big-endian GGUF files are "
                      "not supported",
                      out->version));
    }
    return Fail(fmt::format("unsupported GGUF version {} (supported: 2 and 3)", out->version));
  }
  SHOAL_RETURN_IF_ERROR(ReadPod(&n_tensors_, "tensor count"));
  SHOAL_RETURN_IF_ERROR(ReadPod(&n_kv_, "metadata count"));
  const uint64_t left = size_ - pos_;
  if (n_kv_ > left / kMinKvBytes) {
    return Fail(
        fmt::format("metadata count {} cannot fit in the {} bytes left (each key/value "
                    "needs at least {} bytes)",
                    n_kv_, left, kMinKvBytes));
  }
  if (n_tensors_ > left / kMinTensorInfoBytes ||
      n_kv_ * kMinKvBytes + n_tensors_ * kMinTensorInfoBytes > left) {
    return Fail(
        fmt::format("tensor count {} cannot fit in the {} bytes left after {} metadata "
                    "entries (each tensor info needs at least {} bytes)",
                    n_tensors_, left, n_kv_, kMinTensorInfoBytes));
  }
  return Status::Ok();
}

Status Parser::ReadMetadata(SingleFile* out) {
  out->kv.reserve(std::min(n_kv_, kMaxReserve));
  for (uint64_t k = 0; k < n_kv_; ++k) {
    ctx_ = fmt::format("metadata entry #{}", k);
    const uint64_t at = pos_;
    std::string key;
    SHOAL_RETURN_IF_ERROR(ReadString(&key, "key"));
    if (key.empty()) return Fail(fmt::format("empty key at offset {}", at));
    ctx_ = fmt::format("metadata key '{}'", Printable(key));
    if (out->kv_index.count(key)) {
      return Fail(fmt::format("duplicate key at offset {}", at));
    }
    Value v;
    SHOAL_RETURN_IF_ERROR(ReadValueType(&v.type, "value type"));
    SHOAL_RETURN_IF_ERROR(ReadValue(v.type, 0, &v));
    out->kv_index.emplace(key, out->kv.size());
    out->kv.emplace_back(std::move(key), std::move(v));
  }
  ctx_ = "metadata key 'general.alignment'";
  auto it = out->kv_index.find("general.alignment");
  if (it != out->kv_index.end()) {
    const Value& v = out->kv[it->second].second;
    if (!v.IsInteger()) {
      return Fail(fmt::format("must be an unsigned integer, not {}", v.TypeString()));
    }
    const int64_t a = v.AsInt();
    if (a <= 0 || !std::has_single_bit(static_cast<uint64_t>(a)) ||
        static_cast<uint64_t>(a) > kMaxAlignment) {
      return Fail(fmt::format("alignment {} must be a non-zero power of two of at most {}",
                              v.ToString(), kMaxAlignment));
    }
    out->alignment = static_cast<uint64_t>(a);
  }
  return Status::Ok();
}

Status Parser::ReadTensorInfo(uint64_t k, TensorInfo* t) {
  ctx_ = fmt::format("tensor #{}", k);
  SHOAL_RETURN_IF_ERROR(ReadString(&t->name, "name"));
  if (t->name.empty()) return Fail("empty tensor name");
  ctx_ = fmt::format("tensor '{}'", Printable(t->name));
  uint32_t n_dims = 0;
  SHOAL_RETURN_IF_ERROR(ReadPod(&n_dims, "dimension count"));
  if (n_dims < 1 || n_dims > 4) {
    return Fail(fmt::format("has {} dimensions (must be 1 to 4)", n_dims));
  }
  t->n_dims = static_cast<int>(n_dims);
  t->ne = {1, 1, 1, 1};
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t ne = 0;
    SHOAL_RETURN_IF_ERROR(ReadPod(&ne, "shape"));
    if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Fail(fmt::format("dimension {} is {} (negative as int64)", d, ne));
    }
    t->ne[d] = static_cast<int64_t>(ne);
    if (__builtin_mul_overflow(n_elements, t->ne[d], &n_elements)) {
      return Fail(fmt::format("shape [{}] overflows the element count",
                              fmt::join(t->ne.begin(), t->ne.begin() + d + 1, ", ")));
    }
  }
  uint32_t type_id = 0;
  SHOAL_RETURN_IF_ERROR(ReadPod(&type_id, "type"));
  const auto info = GetDTypeInfo(type_id);
  if (!info) {
    const std::string_view ggml_name = UnsupportedGgmlTypeName(type_id);
    if (!ggml_name.empty()) {
      return Fail(
          fmt::format("tensor type {} (ggml type id {}) is not supported", ggml_name, type_id));
    }
    return Fail(fmt::format("unknown tensor type id {}", type_id));
  }
  t->type = info->type;
  if (t->ne[0] % info->block_size != 0) {
    return Fail(fmt::format("row length ne[0] = {} is not a multiple of the {} block size {}",
                            t->ne[0], info->name, info->block_size));
  }
  const std::optional<uint64_t> row = RowBytes(t->type, t->ne[0]);
  uint64_t nbytes = row.value_or(0);
  bool overflow = !row.has_value();
  for (int d = 1; d < 4 && !overflow; ++d) {
    overflow = __builtin_mul_overflow(nbytes, static_cast<uint64_t>(t->ne[d]), &nbytes);
  }
  if (overflow) {
    return Fail(
        fmt::format("byte size of shape [{}] {} overflows", fmt::join(t->ne, ", "), info->name));
  }
  t->nbytes = nbytes;
  return ReadPod(&t->offset, "data offset");
}

Status Parser::ReadTensorInfos(SingleFile* out) {
  out->tensors.reserve(std::min(n_tensors_, kMaxReserve));
  for (uint64_t k = 0; k < n_tensors_; ++k) {
    TensorInfo t;
    SHOAL_RETURN_IF_ERROR(ReadTensorInfo(k, &t));
    if (out->tensor_index.count(t.name)) return Fail("duplicate tensor name");
    out->tensor_index.emplace(t.name, out->tensors.size());
    out->tensors.push_back(std::move(t));
  }
  return Status::Ok();
}

Status Parser::PlaceTensorData(SingleFile* out) {
  // pos_ <= size_ and alignment <= 2^31, so this cannot overflow.
  out->header_bytes = pos_;
  out->data_offset = (pos_ + out->alignment - 1) / out->alignment * out->alignment;
  for (TensorInfo& t : out->tensors) {
    ctx_ = fmt::format("tensor '{}'", Printable(t.name));
    if (t.offset % out->alignment != 0) {
      return Fail(fmt::format("data offset {} is not a multiple of the alignment {}", t.offset,
                              out->alignment));
    }
    uint64_t begin = 0, end = 0;
    if (__builtin_add_overflow(out->data_offset, t.offset, &begin) ||
        __builtin_add_overflow(begin, t.nbytes, &end) || end > size_) {
      return Fail(
          fmt::format("data [offset {}, {} bytes] extends past end of file (size {}, data "
                      "section starts at {})",
                      t.offset, t.nbytes, size_, out->data_offset));
    }
    t.data = data_ + begin;
  }
  // No two tensors may share bytes (llama.cpp even requires them back to back, in order).
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : out->tensors) {
    if (t.nbytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const TensorInfo& a = *by_offset[k - 1];
    const TensorInfo& b = *by_offset[k];
    if (a.offset + a.nbytes > b.offset) {
      ctx_ = fmt::format("tensor '{}'", Printable(b.name));
      return Fail(
          fmt::format("data [offset {}, {} bytes] overlaps tensor '{}' [offset {}, {} bytes]",
                      b.offset, b.nbytes, Printable(a.name), a.offset, a.nbytes));
    }
  }
  return Status::Ok();
}

Status Parser::Parse(SingleFile* out) {
  SHOAL_RETURN_IF_ERROR(ReadHeader(out));
  SHOAL_RETURN_IF_ERROR(ReadMetadata(out));
  SHOAL_RETURN_IF_ERROR(ReadTensorInfos(out));
  return PlaceTensorData(out);
}

}  // namespace shoal::gguf
