// Injectable clock (DESIGN.md principle 3: schedulers read time only through this).
#pragma once

#include <chrono>
#include <cstdint>

namespace shoal {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMicros() const = 0;
};

class SteadyClock final : public Clock {
 public:
  int64_t NowMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// Wall time in seconds as a double, for benchmarks and timings.
inline double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace shoal
