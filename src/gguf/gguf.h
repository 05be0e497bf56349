// GGUF v2/v3 model files: metadata, tensor table and mmapped tensor data (split files load as one).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/mapped_file.h"
#include "tensor/dtype.h"

namespace shoal::gguf {

// GGUF metadata value types (ids as stored in the file).
enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
const char* ValueTypeName(ValueType t);

// Alignment of the data section when the file has no `general.alignment` key.
inline constexpr uint64_t kDefaultAlignment = 32;
// Deepest nesting of arrays accepted (an array of scalars has depth 1).
inline constexpr int kMaxArrayDepth = 8;
// Most metadata values (array elements included) one file may hold. Real models hold < 2M (a
// 262k-token vocab with scores and types is ~0.8M); each Value is ~100 bytes in memory, so this
// caps the memory a hostile header can make us allocate at ~1.7 GB.
inline constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 24;
// Longest tensor name ggml accepts (GGML_MAX_NAME = 64 including the terminating NUL).
inline constexpr size_t kMaxTensorNameBytes = 63;

// One metadata value. Scalars use exactly one of u/i/f/b by type; arrays hold elements of
// elem_type in `arr` (nested arrays allowed).
struct Value {
  ValueType type = ValueType::kU32;
  uint64_t u = 0;                         // kU8..kU64
  int64_t i = 0;                          // kI8..kI64
  double f = 0;                           // kF32, kF64
  bool b = false;                         // kBool
  std::string str;                        // kString
  ValueType elem_type = ValueType::kU32;  // kArray
  std::vector<Value> arr;                 // kArray

  bool IsInteger() const;
  bool IsFloat() const { return type == ValueType::kF32 || type == ValueType::kF64; }
  // Numeric value of any integer/float/bool scalar.
  double AsDouble() const;
  int64_t AsInt() const;
  // Human-readable rendering (arrays are shortened after `max_elems`; strings are quoted with
  // C-style escapes so that one value always renders on one line).
  std::string ToString(size_t max_elems = 8) const;
  // Type rendering: "u32", "string", "array[string, 512]", "array[array[i32, 2], 3]".
  std::string TypeString() const;

  // Constructors for each type.
  static Value U8(uint8_t v);
  static Value I8(int8_t v);
  static Value U16(uint16_t v);
  static Value I16(int16_t v);
  static Value U32(uint32_t v);
  static Value I32(int32_t v);
  static Value U64(uint64_t v);
  static Value I64(int64_t v);
  static Value F32(float v);
  static Value F64(double v);
  static Value Bool(bool v);
  static Value String(std::string v);
  static Value Array(ValueType elem_type, std::vector<Value> elems);

  // Same type and same value (only the fields the type uses; NaN equals NaN).
  friend bool operator==(const Value& a, const Value& b);
};

struct TensorInfo {
  std::string name;
  DType type = DType::kF32;
  int n_dims = 0;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // ggml order: ne[0] is the contiguous dimension
  uint64_t offset = 0;                       // relative to its file's data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // points into the mmap of the file that holds it
  int file_index = 0;             // which split file

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  uint64_t row_bytes() const;
};

class File {
 public:
  // Opens and fully validates a GGUF file. If the name looks like NAME-00001-of-0000N.gguf (or
  // the metadata has split.count > 1), all shards are opened and merged into one tensor table.
  // Opening a later shard directly is an error that names the first one. Shards must agree on
  // split.count / split.no (0-based) / split.tensors.count; metadata comes from shard 1.
  // Errors name the file and what is wrong and where; no input makes this crash or allocate more
  // than the file can justify. `mode`: mmap the files (default) or read them into huge pages.
  static Result<std::unique_ptr<File>> Open(const std::string& path, MapMode mode = MapMode::kMap);
  // Opens exactly one file, never following split shards (split.* keys stay plain metadata).
  static Result<std::unique_ptr<File>> OpenSingle(const std::string& path,
                                                  MapMode mode = MapMode::kMap);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  uint64_t file_bytes() const;                       // sum over shards
  size_t num_files() const { return maps_.size(); }  // 1, or the number of split shards
  // MappedFile::DropPages on the shard holding [p, p + n) (tensor bytes the caller copied).
  void DropPages(const uint8_t* p, uint64_t n) const;
  // True when [p, p + n) lies in a shard mapped with MapMode::kMap (4 KiB page-cache pages).
  bool InPageCache(const uint8_t* p, uint64_t n) const;
  const std::string& file_path(size_t file_index) const { return maps_[file_index]->path(); }
  // Byte offset in file `file_index` where its data section (tensor offset 0) starts.
  uint64_t data_offset(size_t file_index = 0) const { return data_offsets_[file_index]; }

  // Metadata (ordered as in the file for listing; lookup by key).
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* Find(const std::string& key) const;
  // Typed getters: errors if missing or of an incompatible type. Integer getters accept any
  // integer type whose value fits.
  Result<std::string> GetString(const std::string& key) const;
  Result<uint64_t> GetUint(const std::string& key) const;
  Result<double> GetFloat(const std::string& key) const;  // any numeric type
  Result<bool> GetBool(const std::string& key) const;
  std::string GetStringOr(const std::string& key, const std::string& dflt) const;
  uint64_t GetUintOr(const std::string& key, uint64_t dflt) const;
  double GetFloatOr(const std::string& key, double dflt) const;
  bool GetBoolOr(const std::string& key, bool dflt) const;
  // Array accessors: error if missing, not an array, or element type not convertible.
  Result<std::vector<std::string>> GetStringArray(const std::string& key) const;
  Result<std::vector<double>> GetNumberArray(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(const std::string& name) const;

 private:
  File() = default;
  friend class Parser;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::unique_ptr<MappedFile>> maps_;
  std::vector<uint64_t> data_offsets_;  // per file
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// Path of shard `split_no` (1-based) of `split_count`: "PREFIX-00001-of-00003.gguf".
std::string SplitPath(const std::string& prefix, int split_no, int split_count);

// Builds a GGUF v3 file in memory-friendly streaming fashion: header, metadata, tensor infos,
// padding to the alignment, then each tensor's data padded to the alignment (the layout
// llama.cpp's gguf reader requires). A `general.alignment` key (u32) is written when the alignment
// is not the default 32. Invalid input (bad names, shapes, values out of range for their type,
// too-deep arrays, alignment not a power of two) is reported by AddTensor or Write.
class Writer {
 public:
  explicit Writer(uint64_t alignment = 32) : alignment_(alignment) {}
  void SetValue(const std::string& key, Value v);
  void SetString(const std::string& key, const std::string& s);
  void SetU32(const std::string& key, uint32_t v);
  void SetI32(const std::string& key, int32_t v);
  void SetF32(const std::string& key, float v);
  void SetBool(const std::string& key, bool v);
  void SetStringArray(const std::string& key, const std::vector<std::string>& v);
  void SetF32Array(const std::string& key, const std::vector<float>& v);
  void SetI32Array(const std::string& key, const std::vector<int32_t>& v);
  // Copies every metadata key of `src` whose name starts with `prefix`. Keys describing the
  // source's file layout (general.alignment, split.*) are copied only when `prefix` itself starts
  // with "general.alignment" or "split.".
  void CopyMetadata(const File& src, const std::string& prefix);
  // Adds a tensor; `data` must hold exactly the bytes for ne/type and stay alive until Write.
  Status AddTensor(const std::string& name, DType type, const std::vector<int64_t>& ne,
                   const void* data, uint64_t nbytes);
  // Same, but the writer keeps its own copy of the bytes.
  Status AddTensorCopy(const std::string& name, DType type, const std::vector<int64_t>& ne,
                       std::vector<uint8_t> bytes);
  Status Write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    const void* data;
    uint64_t nbytes;
    std::shared_ptr<std::vector<uint8_t>> owned;
  };
  uint64_t alignment_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace shoal::gguf
