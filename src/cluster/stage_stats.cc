// StageStats: a ring of one-second buckets of per-stage compute time and rows.
#include "cluster/stage_stats.h"

#include <algorithm>

namespace shoal::cluster {

StageStats::StageStats(size_t n_stages, const Clock* clock)
    : n_stages_(n_stages),
      clock_(clock),
      start_us_(clock->NowMicros()),
      ring_(kWindowS + 1),
      busy_total_us_(n_stages, 0) {
  for (Bucket& b : ring_) b.busy_us.assign(n_stages, 0);
}

StageStats::Bucket& StageStats::BucketFor(int64_t second) {
  Bucket& b = ring_[static_cast<size_t>(second % static_cast<int64_t>(ring_.size()))];
  if (b.second != second) {
    b.second = second;
    std::fill(b.busy_us.begin(), b.busy_us.end(), 0);
    b.rows = 0;
  }
  return b;
}

void StageStats::Record(std::span<const uint32_t> stage_us, int64_t n_rows) {
  std::lock_guard<std::mutex> lk(mu_);
  Bucket& b = BucketFor(clock_->NowMicros() / 1'000'000);
  for (size_t s = 0; s < n_stages_ && s < stage_us.size(); ++s) {
    b.busy_us[s] += stage_us[s];
    busy_total_us_[s] += stage_us[s];
  }
  b.rows += n_rows;
  rows_total_ += n_rows;
}

std::vector<StageLoad> StageStats::Snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  const int64_t now = clock_->NowMicros();
  const int64_t cur = now / 1'000'000;
  // The window: whole seconds cur-9 .. cur (the current one partly elapsed), not before start.
  const int64_t from = std::max(start_us_, (cur - (kWindowS - 1)) * 1'000'000);
  const double wall_s = static_cast<double>(now - from) * 1e-6;
  std::vector<StageLoad> out(n_stages_);
  int64_t rows = 0;
  std::vector<int64_t> busy(n_stages_, 0);
  for (const Bucket& b : ring_) {
    if (b.second < cur - (kWindowS - 1) || b.second > cur) continue;
    rows += b.rows;
    for (size_t s = 0; s < n_stages_; ++s) busy[s] += b.busy_us[s];
  }
  for (size_t s = 0; s < n_stages_; ++s) {
    StageLoad& l = out[s];
    if (wall_s > 0) {
      l.busy_fraction = std::min(1.0, static_cast<double>(busy[s]) * 1e-6 / wall_s);
      l.tokens_per_s = static_cast<double>(rows) / wall_s;
    }
    l.busy_s_total = static_cast<double>(busy_total_us_[s]) * 1e-6;
    l.tokens_total = rows_total_;
  }
  return out;
}

}  // namespace shoal::cluster
