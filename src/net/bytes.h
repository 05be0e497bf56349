// ByteWriter/ByteReader: little-endian typed fields for message bodies, bounds-checked reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace shoal::net {

// Appends little-endian fields to a byte vector (whatever the host's byte order).
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>* out) : out_(out) {}

  void U8(uint8_t v) { out_->push_back(v); }
  void U16(uint16_t v);
  void U32(uint32_t v);
  void U64(uint64_t v);
  void F32(float v);
  // Raw bytes, no length prefix (fixed-size fields such as nonces).
  void Bytes(std::span<const uint8_t> bytes);
  // u32 byte count, then the bytes.
  void String(std::string_view s);
  // u32 element count, then the elements.
  void F32Array(std::span<const float> values);
  void U32Array(std::span<const uint32_t> values);

 private:
  std::vector<uint8_t>* out_;
};

// Reads little-endian fields from a byte span. Every read checks the remaining length and
// returns an error naming the field and offset instead of reading past the end; after an error
// the reader stays where it was. `what` names the field in messages.
class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  Status U8(uint8_t* v, const char* what = "u8");
  Status U16(uint16_t* v, const char* what = "u16");
  Status U32(uint32_t* v, const char* what = "u32");
  Status U64(uint64_t* v, const char* what = "u64");
  Status F32(float* v, const char* what = "f32");
  // Exactly out.size() raw bytes.
  Status Bytes(std::span<uint8_t> out, const char* what = "bytes");
  // A u32-length-prefixed string of at most max_len bytes.
  Status String(std::string* s, uint32_t max_len, const char* what = "string");
  // A u32-count-prefixed array of at most max_count elements.
  Status F32Array(std::vector<float>* values, uint32_t max_count, const char* what = "f32[]");
  Status U32Array(std::vector<uint32_t>* values, uint32_t max_count, const char* what = "u32[]");
  // Error unless every byte was consumed (trailing bytes mean a malformed body).
  Status ExpectEnd(const char* what = "message") const;

  // A u32 element count of at most max_count whose elements (elem_size bytes each, at least)
  // still fit in what is left: checked before anything is allocated for them.
  Status Count(uint32_t* n, uint32_t max_count, size_t elem_size, const char* what);

  size_t offset() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  Status Need(size_t n, const char* what) const;

  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

// Little-endian loads/stores on raw pointers (the caller has checked the bounds).
inline void StoreLE16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void StoreLE32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void StoreLE64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint16_t LoadLE16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}
inline uint32_t LoadLE32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t LoadLE64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace shoal::net
