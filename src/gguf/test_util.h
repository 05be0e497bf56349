// Test-only helpers for the gguf tests: temp dirs, byte I/O and a raw GGUF byte builder.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/test_support.h"

namespace shoal::gguf::testing {

using shoal::testing::Exists;
using shoal::testing::SharedPath;
using shoal::testing::TempDir;

inline std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::vector<uint8_t> bytes(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

inline void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// Appends little-endian GGUF primitives; each call returns the offset it wrote at, so tests can
// later overwrite exactly that field.
class RawGguf {
 public:
  template <typename T>
  size_t Pod(T v) {
    const size_t at = bytes.size();
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes.insert(bytes.end(), b, b + sizeof(T));
    return at;
  }
  size_t U32(uint32_t v) { return Pod(v); }
  size_t U64(uint64_t v) { return Pod(v); }
  size_t Str(const std::string& s) {
    const size_t at = U64(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return at;
  }
  // "GGUF", version, tensor count, kv count.
  void Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bytes.insert(bytes.end(), {'G', 'G', 'U', 'F'});
    U32(version);
    U64(n_tensors);
    U64(n_kv);
  }
  // A tensor info; returns the offset of its name.
  size_t Tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type,
                uint64_t offset) {
    const size_t at = Str(name);
    U32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) U64(d);
    U32(type);
    U64(offset);
    return at;
  }
  void PadTo(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
  }
  template <typename T>
  void Set(size_t at, T v) {
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
  std::vector<uint8_t> bytes;
};

}  // namespace shoal::gguf::testing
