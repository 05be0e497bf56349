// Read-only memory-mapped files (weights are mmapped, never copied: DESIGN.md principle 5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace shoal {

class MappedFile {
 public:
  // Maps the whole file read-only. An empty file maps to size 0 with a null data pointer.
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// Reads a whole (small) file into a string.
Result<std::string> ReadFileToString(const std::string& path);
// Writes bytes to a file, replacing it.
Status WriteStringToFile(const std::string& path, const std::string& data);

}  // namespace shoal
