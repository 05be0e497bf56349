// ByteWriter/ByteReader implementation (explicit little-endian byte order).
#include "net/bytes.h"

#include <bit>
#include <cstring>

namespace shoal::net {

void ByteWriter::U16(uint16_t v) {
  uint8_t b[2];
  StoreLE16(b, v);
  out_->insert(out_->end(), b, b + 2);
}

void ByteWriter::U32(uint32_t v) {
  uint8_t b[4];
  StoreLE32(b, v);
  out_->insert(out_->end(), b, b + 4);
}

void ByteWriter::U64(uint64_t v) {
  uint8_t b[8];
  StoreLE64(b, v);
  out_->insert(out_->end(), b, b + 8);
}

void ByteWriter::F32(float v) { U32(std::bit_cast<uint32_t>(v)); }

void ByteWriter::Bytes(std::span<const uint8_t> bytes) {
  out_->insert(out_->end(), bytes.begin(), bytes.end());
}

void ByteWriter::String(std::string_view s) {
  U32(static_cast<uint32_t>(s.size()));
  out_->insert(out_->end(), s.begin(), s.end());
}

void ByteWriter::F32Array(std::span<const float> values) {
  U32(static_cast<uint32_t>(values.size()));
  const size_t at = out_->size();
  out_->resize(at + values.size() * 4);
  uint8_t* p = out_->data() + at;
  if constexpr (std::endian::native == std::endian::little) {
    // Activations are megabytes: one copy of the float bytes, already in wire order.
    if (!values.empty()) std::memcpy(p, values.data(), values.size() * 4);
  } else {
    for (size_t i = 0; i < values.size(); ++i)
      StoreLE32(p + 4 * i, std::bit_cast<uint32_t>(values[i]));
  }
}

void ByteWriter::U32Array(std::span<const uint32_t> values) {
  U32(static_cast<uint32_t>(values.size()));
  const size_t at = out_->size();
  out_->resize(at + values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i) StoreLE32(out_->data() + at + 4 * i, values[i]);
}

Status ByteReader::Need(size_t n, const char* what) const {
  if (remaining() < n) {
    return Errorf("truncated {}: needs {} bytes at offset {}, {} left", what, n, pos_, remaining());
  }
  return Status::Ok();
}

Status ByteReader::U8(uint8_t* v, const char* what) {
  SHOAL_RETURN_IF_ERROR(Need(1, what));
  *v = bytes_[pos_++];
  return Status::Ok();
}

Status ByteReader::U16(uint16_t* v, const char* what) {
  SHOAL_RETURN_IF_ERROR(Need(2, what));
  *v = LoadLE16(bytes_.data() + pos_);
  pos_ += 2;
  return Status::Ok();
}

Status ByteReader::U32(uint32_t* v, const char* what) {
  SHOAL_RETURN_IF_ERROR(Need(4, what));
  *v = LoadLE32(bytes_.data() + pos_);
  pos_ += 4;
  return Status::Ok();
}

Status ByteReader::U64(uint64_t* v, const char* what) {
  SHOAL_RETURN_IF_ERROR(Need(8, what));
  *v = LoadLE64(bytes_.data() + pos_);
  pos_ += 8;
  return Status::Ok();
}

Status ByteReader::F32(float* v, const char* what) {
  uint32_t bits = 0;
  SHOAL_RETURN_IF_ERROR(U32(&bits, what));
  *v = std::bit_cast<float>(bits);
  return Status::Ok();
}

Status ByteReader::Bytes(std::span<uint8_t> out, const char* what) {
  SHOAL_RETURN_IF_ERROR(Need(out.size(), what));
  if (!out.empty()) std::memcpy(out.data(), bytes_.data() + pos_, out.size());
  pos_ += out.size();
  return Status::Ok();
}

// Reads a count, checks it against the limit and the bytes left; leaves pos_ unchanged on error.
Status ByteReader::Count(uint32_t* n, uint32_t max_count, size_t elem_size, const char* what) {
  const size_t start = pos_;
  SHOAL_RETURN_IF_ERROR(U32(n, what));
  if (*n > max_count) {
    pos_ = start;
    return Errorf("{} at offset {}: length {} exceeds the limit {}", what, start, *n, max_count);
  }
  const Status need = Need(static_cast<size_t>(*n) * elem_size, what);
  if (!need.ok()) pos_ = start;
  return need;
}

Status ByteReader::String(std::string* s, uint32_t max_len, const char* what) {
  uint32_t n = 0;
  SHOAL_RETURN_IF_ERROR(Count(&n, max_len, 1, what));
  s->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
  pos_ += n;
  return Status::Ok();
}

Status ByteReader::F32Array(std::vector<float>* values, uint32_t max_count, const char* what) {
  uint32_t n = 0;
  SHOAL_RETURN_IF_ERROR(Count(&n, max_count, 4, what));
  values->resize(n);
  const uint8_t* p = bytes_.data() + pos_;
  if constexpr (std::endian::native == std::endian::little) {
    if (n > 0) std::memcpy(values->data(), p, static_cast<size_t>(n) * 4);
  } else {
    for (uint32_t i = 0; i < n; ++i) (*values)[i] = std::bit_cast<float>(LoadLE32(p + 4 * i));
  }
  pos_ += static_cast<size_t>(n) * 4;
  return Status::Ok();
}

Status ByteReader::U32Array(std::vector<uint32_t>* values, uint32_t max_count, const char* what) {
  uint32_t n = 0;
  SHOAL_RETURN_IF_ERROR(Count(&n, max_count, 4, what));
  values->resize(n);
  for (uint32_t i = 0; i < n; ++i) (*values)[i] = LoadLE32(bytes_.data() + pos_ + 4 * i);
  pos_ += static_cast<size_t>(n) * 4;
  return Status::Ok();
}

Status ByteReader::ExpectEnd(const char* what) const {
  if (remaining() != 0) {
    return Errorf("{}: {} unexpected trailing bytes at offset {}", what, remaining(), pos_);
  }
  return Status::Ok();
}

}  // namespace shoal::net
