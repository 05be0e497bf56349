// mmap-backed MappedFile and small whole-file helpers.
#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace shoal {

namespace {

// The file's bytes in private anonymous memory advised for huge pages, or an error.
Result<const uint8_t*> ReadHuge(int fd, uint64_t size, const std::string& path) {
  SHOAL_ASSIGN_OR_RETURN(uint8_t* dst, MapAnonymousHuge(size, path));
  void* p = dst;
  for (uint64_t done = 0; done < size;) {
    const ssize_t r = ::pread(fd, dst + done, size - done, static_cast<off_t>(done));
    if (r <= 0) {
      const int e = r < 0 ? errno : EIO;
      ::munmap(p, size);
      return Errorf("{}: read failed at byte {}: {}", path, done, std::strerror(e));
    }
    done += static_cast<uint64_t>(r);
  }
  ::mprotect(p, size, PROT_READ);
  return static_cast<const uint8_t*>(dst);
}

}  // namespace

Result<uint8_t*> MapAnonymousHuge(uint64_t size, const std::string& what) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return Errorf("{}: cannot allocate {} bytes: {}", what, size, std::strerror(errno));
  ::madvise(p, size, MADV_HUGEPAGE);
  return static_cast<uint8_t*>(p);
}

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path, MapMode mode) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errorf("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Errorf("{}: cannot stat: {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Errorf("{}: not a regular file", path);
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  f->mode_ = mode;
  if (f->size_ > 0 && mode == MapMode::kReadHuge) {
    auto data = ReadHuge(fd, f->size_, path);
    ::close(fd);
    if (!data.ok()) return data.status();
    f->data_ = *data;
    return f;
  }
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return Errorf("{}: mmap failed: {}", path, std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

void MappedFile::DropPages(const uint8_t* p, uint64_t n) const {
  if (mode_ != MapMode::kMap || !Contains(p) || n > static_cast<uint64_t>(data_ + size_ - p))
    return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  // Advice on a shared read-only file mapping: it cannot lose data, so its result is moot.
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Result<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Errorf("{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteStringToFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Errorf("{}: cannot create: {}", path, std::strerror(errno));
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) return Errorf("{}: write failed", path);
  return Status::Ok();
}

}  // namespace shoal
