// What a node reports of its work in every heartbeat answer (cluster/wire.h encodes it).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace shoal::cluster {

// A node's work since it started, as its heartbeat answers report it (counters: rates are their
// differences): tokens (rows) its stage ran, the time it spent running them, and of that the
// time in its group's collectives, their count and the bytes it received through them.
struct NodeLoad {
  uint64_t tokens = 0, busy_ns = 0;
  uint64_t collective_ns = 0, collective_calls = 0, collective_bytes_in = 0;
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
