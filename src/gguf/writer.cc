// gguf::Writer: serializes metadata and tensors as a GGUF v3 file in llama.cpp's layout.
#include <fmt/format.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include "gguf/gguf.h"

namespace shoal::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kMaxAlignment = uint64_t{1} << 31;  // general.alignment is a u32

template <typename T>
void Put(std::string* buf, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  buf->append(bytes, sizeof(T));
}

void PutString(std::string* buf, const std::string& s) {
  Put<uint64_t>(buf, s.size());
  buf->append(s);
}

// Why `v` (at nesting `depth`) cannot be written, or "" if it can; counts values into `n_values`.
std::string CheckValue(const Value& v, int depth, uint64_t* n_values) {
  ++*n_values;
  auto u_fits = [&](uint64_t max) { return v.u <= max; };
  auto i_fits = [&](int64_t min, int64_t max) { return v.i >= min && v.i <= max; };
  bool fits = true;
  switch (v.type) {
    case ValueType::kU8:
      fits = u_fits(0xff);
      break;
    case ValueType::kU16:
      fits = u_fits(0xffff);
      break;
    case ValueType::kU32:
      fits = u_fits(0xffffffff);
      break;
    case ValueType::kI8:
      fits = i_fits(-128, 127);
      break;
    case ValueType::kI16:
      fits = i_fits(-32768, 32767);
      break;
    case ValueType::kI32:
      fits = i_fits(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
      break;
    case ValueType::kF32:
      fits = !std::isfinite(v.f) || std::fabs(v.f) <= std::numeric_limits<float>::max();
      break;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64:
    case ValueType::kBool:
    case ValueType::kString:
      break;
    case ValueType::kArray: {
      if (depth >= kMaxArrayDepth) {
        return fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth);
      }
      if (static_cast<uint32_t>(v.elem_type) > static_cast<uint32_t>(ValueType::kF64)) {
        return fmt::format("unknown array element type {}", static_cast<uint32_t>(v.elem_type));
      }
      for (size_t k = 0; k < v.arr.size(); ++k) {
        if (v.arr[k].type != v.elem_type) {
          return fmt::format("element {} is {} in an array of {}", k, v.arr[k].TypeString(),
                             ValueTypeName(v.elem_type));
        }
        std::string why = CheckValue(v.arr[k], depth + 1, n_values);
        if (!why.empty()) return fmt::format("element {}: {}", k, why);
      }
      return "";
    }
    default:
      return fmt::format("unknown value type {}", static_cast<uint32_t>(v.type));
  }
  if (!fits) return fmt::format("value {} does not fit in {}", v.ToString(), ValueTypeName(v.type));
  return "";
}

// Appends the encoding of a value already accepted by CheckValue (without its type id).
void PutValue(std::string* buf, const Value& v) {
  switch (v.type) {
    case ValueType::kU8:
      Put(buf, static_cast<uint8_t>(v.u));
      return;
    case ValueType::kU16:
      Put(buf, static_cast<uint16_t>(v.u));
      return;
    case ValueType::kU32:
      Put(buf, static_cast<uint32_t>(v.u));
      return;
    case ValueType::kU64:
      Put(buf, v.u);
      return;
    case ValueType::kI8:
      Put(buf, static_cast<int8_t>(v.i));
      return;
    case ValueType::kI16:
      Put(buf, static_cast<int16_t>(v.i));
      return;
    case ValueType::kI32:
      Put(buf, static_cast<int32_t>(v.i));
      return;
    case ValueType::kI64:
      Put(buf, v.i);
      return;
    case ValueType::kF32:
      Put(buf, static_cast<float>(v.f));
      return;
    case ValueType::kF64:
      Put(buf, v.f);
      return;
    case ValueType::kBool:
      Put(buf, static_cast<uint8_t>(v.b ? 1 : 0));
      return;
    case ValueType::kString:
      PutString(buf, v.str);
      return;
    case ValueType::kArray:
      Put(buf, static_cast<uint32_t>(v.elem_type));
      Put<uint64_t>(buf, v.arr.size());
      for (const Value& e : v.arr) PutValue(buf, e);
      return;
  }
}

uint64_t AlignUp(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// Writes `n` bytes or reports why not.
Status WriteAll(std::FILE* f, const void* data, uint64_t n, const std::string& path) {
  if (n == 0 || std::fwrite(data, 1, n, f) == n) return Status::Ok();
  return Errorf("{}: write failed: {}", path, std::strerror(errno));
}

}  // namespace

void Writer::SetValue(const std::string& key, Value v) {
  for (auto& [k, old] : kv_) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  kv_.emplace_back(key, std::move(v));
}

void Writer::SetString(const std::string& key, const std::string& s) {
  SetValue(key, Value::String(s));
}
void Writer::SetU32(const std::string& key, uint32_t v) { SetValue(key, Value::U32(v)); }
void Writer::SetI32(const std::string& key, int32_t v) { SetValue(key, Value::I32(v)); }
void Writer::SetF32(const std::string& key, float v) { SetValue(key, Value::F32(v)); }
void Writer::SetBool(const std::string& key, bool v) { SetValue(key, Value::Bool(v)); }

void Writer::SetStringArray(const std::string& key, const std::vector<std::string>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (const auto& s : v) elems.push_back(Value::String(s));
  SetValue(key, Value::Array(ValueType::kString, std::move(elems)));
}

void Writer::SetF32Array(const std::string& key, const std::vector<float>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (float x : v) elems.push_back(Value::F32(x));
  SetValue(key, Value::Array(ValueType::kF32, std::move(elems)));
}

void Writer::SetI32Array(const std::string& key, const std::vector<int32_t>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (int32_t x : v) elems.push_back(Value::I32(x));
  SetValue(key, Value::Array(ValueType::kI32, std::move(elems)));
}

void Writer::CopyMetadata(const File& src, const std::string& prefix) {
  const bool layout_prefix =
      prefix.starts_with("general.alignment") || prefix.starts_with("split.");
  for (const auto& [key, v] : src.metadata()) {
    if (!key.starts_with(prefix)) continue;
    const bool layout_key = key == "general.alignment" || key.starts_with("split.");
    if (layout_key && !layout_prefix) continue;
    SetValue(key, v);
  }
}

Status Writer::AddTensor(const std::string& name, DType type, const std::vector<int64_t>& ne,
                         const void* data, uint64_t nbytes) {
  if (name.empty()) return Errorf("tensor with an empty name");
  if (name.size() > kMaxTensorNameBytes) {
    return Errorf("tensor '{}': name is {} bytes, longer than ggml's limit of {}", name,
                  name.size(), kMaxTensorNameBytes);
  }
  for (const auto& t : tensors_) {
    if (t.name == name) return Errorf("tensor '{}' added twice", name);
  }
  const auto info = GetDTypeInfo(static_cast<uint32_t>(type));
  if (!info) return Errorf("tensor '{}': unknown type id {}", name, static_cast<uint32_t>(type));
  if (ne.empty() || ne.size() > 4) {
    return Errorf("tensor '{}': {} dimensions (must be 1 to 4)", name, ne.size());
  }
  int64_t n_elements = 1;
  for (int64_t d : ne) {
    if (d < 0 || __builtin_mul_overflow(n_elements, d, &n_elements)) {
      return Errorf("tensor '{}': invalid shape [{}]", name, fmt::join(ne, ", "));
    }
  }
  const std::optional<uint64_t> row = RowBytes(type, ne[0]);
  if (!row) {
    return Errorf("tensor '{}': ne[0] = {} is not a multiple of the {} block size {}", name, ne[0],
                  info->name, info->block_size);
  }
  uint64_t expected = *row;
  for (size_t d = 1; d < ne.size(); ++d) {
    if (__builtin_mul_overflow(expected, static_cast<uint64_t>(ne[d]), &expected)) {
      return Errorf("tensor '{}': byte size of shape [{}] overflows", name, fmt::join(ne, ", "));
    }
  }
  if (nbytes != expected) {
    return Errorf("tensor '{}': {} bytes given but shape [{}] of {} needs {}", name, nbytes,
                  fmt::join(ne, ", "), info->name, expected);
  }
  if (nbytes > 0 && data == nullptr) return Errorf("tensor '{}': null data", name);
  tensors_.push_back(PendingTensor{name, type, ne, data, nbytes, nullptr});
  return Status::Ok();
}

Status Writer::AddTensorCopy(const std::string& name, DType type, const std::vector<int64_t>& ne,
                             std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  SHOAL_RETURN_IF_ERROR(AddTensor(name, type, ne, owned->data(), owned->size()));
  tensors_.back().owned = std::move(owned);
  return Status::Ok();
}

Status Writer::Write(const std::string& path) const {
  if (!std::has_single_bit(alignment_) || alignment_ > kMaxAlignment) {
    return Errorf("{}: alignment {} must be a non-zero power of two of at most {}", path,
                  alignment_, kMaxAlignment);
  }
  std::vector<std::pair<std::string, Value>> kv = kv_;
  bool has_alignment = false;
  uint64_t n_values = 0;
  for (const auto& [key, v] : kv) {
    if (key.empty()) return Errorf("{}: empty metadata key", path);
    if (key == "general.alignment") {
      if (v.type != ValueType::kU32 || v.u != alignment_) {
        return Errorf(
            "{}: metadata key 'general.alignment' is {} {} but the writer aligns to {} "
            "(it must be that value as u32)",
            path, v.TypeString(), v.ToString(), alignment_);
      }
      has_alignment = true;
    }
    std::string why = CheckValue(v, 0, &n_values);
    if (!why.empty()) return Errorf("{}: metadata key '{}': {}", path, key, why);
  }
  if (n_values > kMaxMetadataValues) {
    return Errorf("{}: {} metadata values, more than readers accept ({})", path, n_values,
                  kMaxMetadataValues);
  }
  if (!has_alignment && alignment_ != kDefaultAlignment) {
    kv.emplace_back("general.alignment", Value::U32(static_cast<uint32_t>(alignment_)));
  }

  std::string header;
  Put<uint32_t>(&header, 0x46554747);  // "GGUF"
  Put<uint32_t>(&header, kVersion);
  Put<uint64_t>(&header, tensors_.size());
  Put<uint64_t>(&header, kv.size());
  for (const auto& [key, v] : kv) {
    PutString(&header, key);
    Put(&header, static_cast<uint32_t>(v.type));
    PutValue(&header, v);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    PutString(&header, t.name);
    Put<uint32_t>(&header, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) Put<uint64_t>(&header, static_cast<uint64_t>(d));
    Put(&header, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&header, offset);
    offset = AlignUp(offset + t.nbytes, alignment_);
  }
  header.resize(AlignUp(header.size(), alignment_), '\0');

  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Errorf("{}: cannot create: {}", tmp, std::strerror(errno));
  const std::vector<char> zeros(alignment_ > 4096 ? 4096 : alignment_, 0);
  Status st = WriteAll(f, header.data(), header.size(), tmp);
  for (size_t k = 0; k < tensors_.size() && st.ok(); ++k) {
    const PendingTensor& t = tensors_[k];
    st = WriteAll(f, t.data, t.nbytes, tmp);
    for (uint64_t pad = AlignUp(t.nbytes, alignment_) - t.nbytes; pad > 0 && st.ok();) {
      const uint64_t n = std::min<uint64_t>(pad, zeros.size());
      st = WriteAll(f, zeros.data(), n, tmp);
      pad -= n;
    }
  }
  if (std::fclose(f) != 0 && st.ok())
    st = Errorf("{}: close failed: {}", tmp, std::strerror(errno));
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Errorf("{}: cannot rename from {}: {}", path, tmp, std::strerror(errno));
  }
  if (!st.ok()) std::remove(tmp.c_str());
  return st;
}

}  // namespace shoal::gguf
