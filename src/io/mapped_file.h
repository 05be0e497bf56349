// Read-only memory-mapped files (weights are mmapped, never copied: DESIGN.md principle 5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace shoal {

// How a file's bytes reach memory.
enum class MapMode {
  kMap,  // mmap of the file: pages load on first touch and stay shared with the page cache
  // Read once into private anonymous memory advised for transparent huge pages (2 MiB): a
  // decode step streams every weight, and with 4 KiB pages that is a TLB miss per 4 KiB (150k
  // per token for a 600 MB model); a single-thread Q4_K matvec from DRAM ran 7-20% faster from
  // huge pages (15.2-17.4 -> 18.1-18.5 GB/s side by side). Costs the read at load, and the copy
  // is the process's own memory (as many bytes as a fully touched mmap counts in RSS).
  kReadHuge,
};

class MappedFile {
 public:
  // Maps (or reads, per mode) the whole file read-only. An empty file maps to size 0 with a null
  // data pointer.
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path,
                                                  MapMode mode = MapMode::kMap);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool Contains(const uint8_t* p) const { return p >= data_ && p < data_ + size_; }
  MapMode mode() const { return mode_; }

  // The caller holds its own copy of [p, p + n) (weights laid out at load): kMap drops the
  // whole pages inside the range from this process (RSS falls; reading them again faults them
  // back from the page cache, same bytes). kReadHuge keeps them: its copy is the only one.
  void DropPages(const uint8_t* p, uint64_t n) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  MapMode mode_ = MapMode::kMap;
};

// `size` bytes of private anonymous read-write memory advised for transparent huge pages
// (advice only: without THP the pages are 4 KiB); release with munmap. `what` names the
// allocation in the error.
Result<uint8_t*> MapAnonymousHuge(uint64_t size, const std::string& what);

// Reads a whole (small) file into a string.
Result<std::string> ReadFileToString(const std::string& path);
// Writes bytes to a file, replacing it.
Status WriteStringToFile(const std::string& path, const std::string& data);

}  // namespace shoal
