// ReadProcessMemory: VmRSS and VmHWM from /proc/self/status.
#include "base/process_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace shoal {
namespace {

// The kB figure after `key` ("VmRSS:\t  1234 kB"), or -1 when the field is missing.
int64_t FieldKb(std::string_view text, std::string_view key) {
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string_view::npos) {
    if (at == 0 || text[at - 1] == '\n') break;
    at += key.size();
  }
  if (at == std::string_view::npos) return -1;
  size_t i = at + key.size();
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  int64_t v = -1;
  const auto r = std::from_chars(text.data() + i, text.data() + text.size(), v);
  return r.ec == std::errc() ? v : -1;
}

}  // namespace

Result<ProcessMemory> ParseProcStatus(std::string_view text) {
  const int64_t rss = FieldKb(text, "VmRSS:");
  const int64_t hwm = FieldKb(text, "VmHWM:");
  if (rss < 0 || hwm < 0) return Errorf("no VmRSS/VmHWM fields in the process status");
  return ProcessMemory{static_cast<uint64_t>(rss) * 1024, static_cast<uint64_t>(hwm) * 1024};
}

Result<ProcessMemory> ReadProcessMemory() {
  std::ifstream f("/proc/self/status");
  if (!f) return Errorf("cannot read /proc/self/status");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ParseProcStatus(ss.str());
}

}  // namespace shoal
