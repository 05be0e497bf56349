// Process-wide log level.
#include "base/log.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace shoal {
namespace {
// Warn by default; SHOAL_LOG_LEVEL=debug|info|warn|error overrides it at start (the chaos suite
// runs its nodes at debug to see late frames of an older epoch dropped).
int InitialLevel() {
  const char* e = std::getenv("SHOAL_LOG_LEVEL");
  if (e == nullptr) return static_cast<int>(LogLevel::kWarn);
  static const char* kNames[] = {"debug", "info", "warn", "error"};
  for (int i = 0; i < 4; ++i)
    if (std::strcmp(e, kNames[i]) == 0) return i;
  return static_cast<int>(LogLevel::kWarn);
}
// A function's static: set before its first use, also from another file's static initializer.
std::atomic<int>& Level() {
  static std::atomic<int> level{InitialLevel()};
  return level;
}
}  // namespace
LogLevel GetLogLevel() { return static_cast<LogLevel>(Level().load(std::memory_order_relaxed)); }
void SetLogLevel(LogLevel level) { Level().store(static_cast<int>(level)); }
}  // namespace shoal
