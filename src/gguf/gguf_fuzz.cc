// libFuzzer target: writes the input to a temp file and opens it as GGUF (must never crash).
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "gguf/gguf.h"

namespace {

// One temp file per process, rewritten for each input.
const std::string& TempPath() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/gguf_fuzz_XXXXXX.gguf";
    const int fd = ::mkstemps(tmpl.data(), 5);
    if (fd >= 0) ::close(fd);
    return tmpl;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = TempPath();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  const bool written = size == 0 || std::fwrite(data, 1, size, f) == size;
  std::fclose(f);
  if (!written) return 0;
  auto file = shoal::gguf::File::Open(path);
  if (file.ok()) {
    // Touch everything a caller would: values, tensor bytes.
    size_t sink = 0;
    for (const auto& [key, v] : (*file)->metadata()) sink += key.size() + v.ToString().size();
    for (const auto& t : (*file)->tensors()) {
      if (t.nbytes > 0) sink += t.data[0] + t.data[t.nbytes - 1];
    }
    if (sink == 1) std::abort();  // keeps `sink` alive
  } else if (file.status().message().find(path) == std::string::npos) {
    std::abort();  // every error must name the file
  }
  return 0;
}
