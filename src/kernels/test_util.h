// Test helpers for the kernels tests: seeded random data, misaligned buffers, bit comparison, and
// a minimal standalone GGUF reader (tensor table only) for the real model files in ../shared.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace shoal::kernels::testing {

// Normal(0, scale) floats from a fixed seed.
inline std::vector<float> RandomFloats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// A byte buffer whose data() is offset by `misalign` bytes from a 64-byte boundary.
class MisalignedBuffer {
 public:
  MisalignedBuffer(size_t bytes, int misalign) : storage_(bytes + 64 + 64), offset_(0) {
    const auto base = reinterpret_cast<uintptr_t>(storage_.data());
    offset_ = static_cast<size_t>((64 - base % 64) % 64) + static_cast<size_t>(misalign);
  }
  uint8_t* data() { return storage_.data() + offset_; }

 private:
  std::vector<uint8_t> storage_;
  size_t offset_;
};

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Bytes of n elements of t (n a block multiple).
inline size_t Bytes(DType t, int64_t n) { return static_cast<size_t>(*RowBytes(t, n)); }

// The tensor table of a GGUF file (v2/v3), enough to find a tensor's type, shape and bytes.
class TinyGguf {
 public:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    uint32_t type = 0;
    uint64_t offset = 0;
    int64_t elements() const {
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      return n;
    }
  };

  bool Open(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    bytes_.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    pos_ = 0;
    if (bytes_.size() < 24 || std::memcmp(bytes_.data(), "GGUF", 4) != 0) return false;
    pos_ = 4;
    Get<uint32_t>();  // version
    const auto n_tensors = Get<uint64_t>();
    const auto n_kv = Get<uint64_t>();
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < n_kv && ok_; ++i) {
      const std::string key = GetString();
      const auto type = Get<uint32_t>();
      if (key == "general.alignment" && type == 4) {
        alignment = Get<uint32_t>();
      } else {
        SkipValue(type);
      }
    }
    for (uint64_t i = 0; i < n_tensors && ok_; ++i) {
      Tensor t;
      t.name = GetString();
      const auto n_dims = Get<uint32_t>();
      for (uint32_t d = 0; d < n_dims; ++d) t.dims.push_back(static_cast<int64_t>(Get<uint64_t>()));
      t.type = Get<uint32_t>();
      t.offset = Get<uint64_t>();
      tensors_.push_back(t);
    }
    data_start_ = (pos_ + alignment - 1) / alignment * alignment;
    return ok_ && data_start_ <= bytes_.size();
  }

  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* Find(const std::string& name) const {
    for (const auto& t : tensors_)
      if (t.name == name) return &t;
    return nullptr;
  }
  const uint8_t* Data(const Tensor& t) const { return bytes_.data() + data_start_ + t.offset; }

 private:
  template <typename T>
  T Get() {
    T v{};
    if (pos_ + sizeof(T) > bytes_.size()) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string GetString() {
    const auto n = Get<uint64_t>();
    if (!ok_ || pos_ + n > bytes_.size()) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  void SkipValue(uint32_t type) {
    static constexpr size_t kSize[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
      GetString();
    } else if (type == 9) {
      const auto elem = Get<uint32_t>();
      const auto count = Get<uint64_t>();
      for (uint64_t i = 0; i < count && ok_; ++i) SkipValue(elem);
    } else if (type < 13) {
      pos_ += kSize[type];
    } else {
      ok_ = false;
    }
  }

  std::vector<uint8_t> bytes_;
  size_t pos_ = 0;
  size_t data_start_ = 0;
  bool ok_ = true;
  std::vector<Tensor> tensors_;
};

inline std::string SharedDir() {
#ifdef SHOAL_SHARED_DIR
  return SHOAL_SHARED_DIR;
#else
  return "../shared";
#endif
}

}  // namespace shoal::kernels::testing
