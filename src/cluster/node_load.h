// What a node reports of its work in every heartbeat answer (cluster/wire.h encodes it).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <utility>

namespace shoal::cluster {

// A node's work since it started, as its heartbeat answers report it (counters: rates are their
// differences): tokens (rows) its stage ran, the time it spent running them, and of that the
// time in its group's collectives, their count and the bytes it received through them.
struct NodeLoad {
  uint64_t tokens = 0, busy_ns = 0;
  uint64_t collective_ns = 0, collective_calls = 0, collective_bytes_in = 0;
};

// A node's load over the last seconds, from its counters' change (NodeLoadWindow::Rate).
struct NodeLoadRate {
  double seconds = 0;              // the window the rates cover (0: fewer than two samples)
  double busy_fraction = 0;        // of wall time running steps
  double collective_fraction = 0;  // of wall time inside collectives (part of busy)
  double tokens_per_s = 0;
};

// The samples of one node's counters over a sliding window (heartbeat answers, ~10 a second).
class NodeLoadWindow {
 public:
  // 10 s: as the stages' busy % (StageStats::kWindowS).
  explicit NodeLoadWindow(int64_t window_ns = 10'000'000'000) : window_ns_(window_ns) {}
  void Push(int64_t now_ns, const NodeLoad& l) {
    samples_.emplace_back(now_ns, l);
    // Keep one sample at or past the window's start, so the rate spans the whole window.
    while (samples_.size() > 2 && samples_[1].first <= now_ns - window_ns_) samples_.pop_front();
  }
  NodeLoadRate Rate() const {
    NodeLoadRate r;
    if (samples_.size() < 2) return r;
    const auto& [t0, a] = samples_.front();
    const auto& [t1, b] = samples_.back();
    if (t1 <= t0 || b.busy_ns < a.busy_ns) return r;  // a node restarted: its counters too
    const double dt = static_cast<double>(t1 - t0);
    r.seconds = dt * 1e-9;
    r.busy_fraction = static_cast<double>(b.busy_ns - a.busy_ns) / dt;
    r.collective_fraction = static_cast<double>(b.collective_ns - a.collective_ns) / dt;
    r.tokens_per_s = static_cast<double>(b.tokens - a.tokens) / r.seconds;
    return r;
  }

 private:
  int64_t window_ns_;
  std::deque<std::pair<int64_t, NodeLoad>> samples_;
};

// A node's NodeLoad as it grows: added to by its compute thread, read by its link threads.
class NodeLoadCounters {
 public:
  void Add(int64_t tokens, std::chrono::nanoseconds busy, int64_t coll_ns, int64_t coll_calls,
           int64_t coll_bytes_in) {
    tokens_ += static_cast<uint64_t>(tokens);
    busy_ns_ += static_cast<uint64_t>(busy.count());
    coll_ns_ += static_cast<uint64_t>(coll_ns);
    coll_calls_ += static_cast<uint64_t>(coll_calls);
    coll_bytes_ += static_cast<uint64_t>(coll_bytes_in);
  }
  NodeLoad Get() const {
    return {tokens_.load(), busy_ns_.load(), coll_ns_.load(), coll_calls_.load(),
            coll_bytes_.load()};
  }

 private:
  std::atomic<uint64_t> tokens_{0}, busy_ns_{0}, coll_ns_{0}, coll_calls_{0}, coll_bytes_{0};
};

}  // namespace shoal::cluster
