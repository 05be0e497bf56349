// Minimal leveled logging to stderr; quiet by default so stdout stays machine-readable.
#pragma once

#include <fmt/format.h>

#include <cstdio>

namespace shoal {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

LogLevel GetLogLevel();
void SetLogLevel(LogLevel level);

template <typename... Args>
void Log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level < GetLogLevel()) return;
  static const char* kNames[] = {"debug", "info", "warn", "error"};
  fmt::print(stderr, "[{}] {}\n", kNames[static_cast<int>(level)],
             fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace shoal
