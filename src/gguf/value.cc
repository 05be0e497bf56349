// gguf::Value: type names, constructors, numeric conversions and human-readable rendering.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "gguf/gguf.h"

namespace shoal::gguf {

const char* ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kU8:
      return "u8";
    case ValueType::kI8:
      return "i8";
    case ValueType::kU16:
      return "u16";
    case ValueType::kI16:
      return "i16";
    case ValueType::kU32:
      return "u32";
    case ValueType::kI32:
      return "i32";
    case ValueType::kF32:
      return "f32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kU64:
      return "u64";
    case ValueType::kI64:
      return "i64";
    case ValueType::kF64:
      return "f64";
  }
  return "unknown";
}

namespace {

bool IsUnsignedType(ValueType t) {
  return t == ValueType::kU8 || t == ValueType::kU16 || t == ValueType::kU32 ||
         t == ValueType::kU64;
}

bool IsSignedType(ValueType t) {
  return t == ValueType::kI8 || t == ValueType::kI16 || t == ValueType::kI32 ||
         t == ValueType::kI64;
}

// Appends `s` quoted, with C-style escapes for quotes, backslashes and control bytes.
void AppendQuoted(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out->append(fmt::format("\\x{:02x}", u));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void AppendValue(const Value& v, size_t max_elems, std::string* out) {
  switch (v.type) {
    case ValueType::kU8:
    case ValueType::kU16:
    case ValueType::kU32:
    case ValueType::kU64:
      out->append(fmt::format("{}", v.u));
      return;
    case ValueType::kI8:
    case ValueType::kI16:
    case ValueType::kI32:
    case ValueType::kI64:
      out->append(fmt::format("{}", v.i));
      return;
    // Shortest text that reads back to the same number at the stored precision.
    case ValueType::kF32:
      out->append(fmt::format("{}", static_cast<float>(v.f)));
      return;
    case ValueType::kF64:
      out->append(fmt::format("{}", v.f));
      return;
    case ValueType::kBool:
      out->append(v.b ? "true" : "false");
      return;
    case ValueType::kString:
      AppendQuoted(v.str, out);
      return;
    case ValueType::kArray: {
      out->push_back('[');
      const size_t shown = std::min(max_elems, v.arr.size());
      for (size_t k = 0; k < shown; ++k) {
        if (k > 0) out->append(", ");
        AppendValue(v.arr[k], max_elems, out);
      }
      if (shown < v.arr.size()) {
        out->append(fmt::format("{}... {} more", shown > 0 ? ", " : "", v.arr.size() - shown));
      }
      out->push_back(']');
      return;
    }
  }
  out->append("?");
}

}  // namespace

bool Value::IsInteger() const { return IsUnsignedType(type) || IsSignedType(type); }

double Value::AsDouble() const {
  if (IsUnsignedType(type)) return static_cast<double>(u);
  if (IsSignedType(type)) return static_cast<double>(i);
  if (IsFloat()) return f;
  if (type == ValueType::kBool) return b ? 1.0 : 0.0;
  return 0.0;
}

int64_t Value::AsInt() const {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  if (IsUnsignedType(type)) return u > static_cast<uint64_t>(kMax) ? kMax : static_cast<int64_t>(u);
  if (IsSignedType(type)) return i;
  if (type == ValueType::kBool) return b ? 1 : 0;
  if (IsFloat()) {
    // Truncates toward zero, saturating instead of the undefined out-of-range conversion.
    if (std::isnan(f)) return 0;
    if (f >= 9223372036854775808.0) return kMax;
    if (f < -9223372036854775808.0) return kMin;
    return static_cast<int64_t>(f);
  }
  return 0;
}

std::string Value::ToString(size_t max_elems) const {
  std::string out;
  AppendValue(*this, max_elems, &out);
  return out;
}

std::string Value::TypeString() const {
  if (type != ValueType::kArray) return ValueTypeName(type);
  if (elem_type == ValueType::kArray && !arr.empty()) {
    return fmt::format("array[{}, {}]", arr[0].TypeString(), arr.size());
  }
  return fmt::format("array[{}, {}]", ValueTypeName(elem_type), arr.size());
}

namespace {
Value OfType(ValueType t) {
  Value v;
  v.type = t;
  return v;
}
}  // namespace

Value Value::U8(uint8_t x) {
  Value v = OfType(ValueType::kU8);
  v.u = x;
  return v;
}
Value Value::I8(int8_t x) {
  Value v = OfType(ValueType::kI8);
  v.i = x;  // NOLINT(bugprone-signed-char-misuse): sign-extends on purpose
  return v;
}
Value Value::U16(uint16_t x) {
  Value v = OfType(ValueType::kU16);
  v.u = x;
  return v;
}
Value Value::I16(int16_t x) {
  Value v = OfType(ValueType::kI16);
  v.i = x;
  return v;
}
Value Value::U32(uint32_t x) {
  Value v = OfType(ValueType::kU32);
  v.u = x;
  return v;
}
Value Value::I32(int32_t x) {
  Value v = OfType(ValueType::kI32);
  v.i = x;
  return v;
}
Value Value::U64(uint64_t x) {
  Value v = OfType(ValueType::kU64);
  v.u = x;
  return v;
}
Value Value::I64(int64_t x) {
  Value v = OfType(ValueType::kI64);
  v.i = x;
  return v;
}
Value Value::F32(float x) {
  Value v = OfType(ValueType::kF32);
  v.f = x;
  return v;
}
Value Value::F64(double x) {
  Value v = OfType(ValueType::kF64);
  v.f = x;
  return v;
}
Value Value::Bool(bool x) {
  Value v = OfType(ValueType::kBool);
  v.b = x;
  return v;
}
Value Value::String(std::string x) {
  Value v = OfType(ValueType::kString);
  v.str = std::move(x);
  return v;
}
Value Value::Array(ValueType elem_type, std::vector<Value> elems) {
  Value v = OfType(ValueType::kArray);
  v.elem_type = elem_type;
  v.arr = std::move(elems);
  return v;
}

bool operator==(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case ValueType::kU8:
    case ValueType::kU16:
    case ValueType::kU32:
    case ValueType::kU64:
      return a.u == b.u;
    case ValueType::kI8:
    case ValueType::kI16:
    case ValueType::kI32:
    case ValueType::kI64:
      return a.i == b.i;
    case ValueType::kF32:
    case ValueType::kF64:
      return a.f == b.f || (std::isnan(a.f) && std::isnan(b.f));
    case ValueType::kBool:
      return a.b == b.b;
    case ValueType::kString:
      return a.str == b.str;
    case ValueType::kArray:
      return a.elem_type == b.elem_type && a.arr == b.arr;
  }
  return false;
}

}  // namespace shoal::gguf
