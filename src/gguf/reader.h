// Internal: the GGUF parser of one mapped file (File::Open merges the results of split shards).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"

namespace shoal::gguf {

// Everything parsed from one file; tensors' `data` point into that file's bytes.
struct SingleFile {
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t header_bytes = 0;  // end of the tensor infos
  uint64_t data_offset = 0;   // start of the data section: header_bytes aligned up
  std::vector<std::pair<std::string, Value>> kv;
  std::map<std::string, size_t> kv_index;
  std::vector<TensorInfo> tensors;
  std::map<std::string, size_t> tensor_index;
};

// A key or tensor name as it appears in messages: control bytes escaped, at most 100 bytes.
std::string Printable(const std::string& s);

// Parses and validates `size` bytes at `data` (the contents of `path`, which errors name). Never
// reads outside [data, data + size), never allocates more than the input can justify.
class Parser {
 public:
  // `max_values` caps the metadata values (array elements included) the file may hold.
  Parser(std::string path, const uint8_t* data, uint64_t size,
         uint64_t max_values = kMaxMetadataValues);
  Status Parse(SingleFile* out);

 private:
  Status ReadHeader(SingleFile* out);
  Status ReadMetadata(SingleFile* out);
  Status ReadTensorInfos(SingleFile* out);
  Status ReadTensorInfo(uint64_t k, TensorInfo* t);
  Status PlaceTensorData(SingleFile* out);

  Status ReadValue(ValueType type, int depth, Value* out);
  Status ReadArray(int depth, Value* out);
  Status ReadValueType(ValueType* t, const char* what);
  Status ReadString(std::string* out, const char* what);
  Status ReadBytes(void* out, uint64_t n, const char* what);
  template <typename T>
  Status ReadPod(T* out, const char* what) {
    return ReadBytes(out, sizeof(T), what);
  }
  // Reads a `T` and widens it into the Value field `out` (u, i or f).
  template <typename T, typename Field>
  Status ReadScalar(Field* out) {
    T v{};
    SHOAL_RETURN_IF_ERROR(ReadPod(&v, "value"));
    *out = static_cast<Field>(v);  // NOLINT(bugprone-signed-char-misuse): i8 sign-extends
    return Status::Ok();
  }
  Status CountValue();
  Status Need(uint64_t n, const char* what) const;
  // "PATH: CONTEXT[i][j]: what".
  Status Fail(const std::string& what) const;

  std::string path_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t max_values_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  uint64_t n_values_ = 0;            // metadata values so far, array elements included
  std::string ctx_;                  // what is being read, for errors
  std::vector<uint64_t> elem_path_;  // indices of the array elements being read, for errors
};

}  // namespace shoal::gguf
