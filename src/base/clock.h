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

// A clock that moves only when told to (tests, the simulator).
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_us = 0) : now_(start_us) {}
  int64_t NowMicros() const override { return now_; }
  void Advance(int64_t us) { now_ += us; }
  void Set(int64_t us) { now_ = us; }

 private:
  int64_t now_;
};

// Wall time in seconds as a double, for benchmarks and timings.
inline double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace shoal
