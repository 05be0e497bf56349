// Shared CLI plumbing.
#include "cli/common.h"

#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "base/units.h"
#include "io/mapped_file.h"
#include "threading/thread_pool.h"

namespace shoal::cli {

int Fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return 1;
}

Result<std::string> PromptText(const std::string& prompt, const std::string& file, bool p_set,
                               bool f_set) {
  if (p_set == f_set) return Errorf("give exactly one of -p PROMPT or -f PROMPT_FILE");
  if (p_set) return prompt;
  return ReadFileToString(file);
}

Result<DType> ParseKvType(const std::string& name) {
  const auto t = DTypeFromName(name);
  if (!t || (*t != DType::kF16 && *t != DType::kF32))
    return Errorf("--kv-type must be f16 or f32, got '{}'", name);
  return *t;
}

int ResolveThreads(int threads) { return threads > 0 ? threads : HardwareThreads(); }

uint64_t RaiseFileLimit() {
  rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0 && getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  }
  return lim.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(lim.rlim_cur);
}

Result<std::string> ReadKeyFile(const std::string& path, const char* flag) {
  auto k = ReadFileToString(path);
  if (!k.ok()) return k.status().Annotate(flag);
  std::string key = *k;
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' '))
    key.pop_back();
  if (key.empty()) return Errorf("{} {} is empty", flag, path);
  return key;
}

// Bytes in /proc/meminfo's MemAvailable (0 when unknown).
uint64_t MemAvailable() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

// "2G", "512M", "1.5GiB", "1073741824", or a fraction of available memory such as "0.3".
Result<uint64_t> ParseMemSize(const std::string& s, const char* flag) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    return Errorf("{}: cannot parse '{}' (use e.g. 2G, 512M or a fraction like 0.3)", flag, s);
  }
  std::string unit = s.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!(v > 0) || !std::isfinite(v)) return Errorf("{} must be positive, got '{}'", flag, s);
  if (unit.empty() && v < 1.0) {
    const uint64_t avail = MemAvailable();
    if (avail == 0) return Errorf("{}: cannot read MemAvailable for a fraction", flag);
    return static_cast<uint64_t>(v * static_cast<double>(avail));
  }
  const std::optional<double> mul = ByteUnitMultiplier(unit);
  if (!mul) return Errorf("{}: unknown unit in '{}'", flag, s);
  return static_cast<uint64_t>(v * *mul);
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t c = s.find(',', start);
    const std::string item =
        s.substr(start, c == std::string::npos ? std::string::npos : c - start);
    if (!item.empty()) out.push_back(item);
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return out;
}

}  // namespace shoal::cli
