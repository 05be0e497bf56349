// StageStats: measured per-stage load of a pipeline (busy fraction, tokens/s). Every stage times
// its own work on each micro-batch; the times ride back to the coordinator with the result.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "base/clock.h"

namespace shoal::cluster {

struct StageLoad {
  double busy_fraction = 0;  // compute time / wall time over the window, in [0, 1]
  double tokens_per_s = 0;   // rows the stage computed per second over the window
  double busy_s_total = 0;   // since start
  int64_t tokens_total = 0;  // since start
};

// Thread-safe: the engine thread records, the HTTP thread reads.
class StageStats {
 public:
  // A window of 10 s: long enough to smooth step-to-step jitter (a decode step is ~1-50 ms),
  // short enough to show a load change within a scrape interval or two. 1-s buckets.
  static constexpr int kWindowS = 10;

  StageStats(size_t n_stages, const Clock* clock);  // clock outlives this
  size_t n_stages() const { return n_stages_; }
  // One micro-batch of n_rows rows came back; stage_us[s] = stage s's compute time (extra
  // entries are ignored, missing ones count as 0).
  void Record(std::span<const uint32_t> stage_us, int64_t n_rows);
  // Each stage's load over the last kWindowS seconds (less just after start). A micro-batch
  // counts in the second its result arrived, so a fraction is clamped to 1.
  std::vector<StageLoad> Snapshot() const;

 private:
  struct Bucket {
    int64_t second = -1;
    std::vector<int64_t> busy_us;  // [stage]
    int64_t rows = 0;
  };
  Bucket& BucketFor(int64_t second);  // mu_ held

  size_t n_stages_;
  const Clock* clock_;
  int64_t start_us_;
  mutable std::mutex mu_;
  std::vector<Bucket> ring_;  // kWindowS + 1 buckets, indexed by second % size
  std::vector<int64_t> busy_total_us_;
  int64_t rows_total_ = 0;
};

}  // namespace shoal::cluster
