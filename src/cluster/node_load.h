// What a node reports of its work in every heartbeat answer (cluster/wire.h encodes it).
#pragma once

#include <cstdint>

namespace shoal::cluster {

// A node's work since it started, as its heartbeat answers report it (counters: rates are their
// differences): tokens (rows) its stage ran, the time it spent running them, and of that the
// time in its group's collectives, their count and the bytes it received through them.
struct NodeLoad {
  uint64_t tokens = 0, busy_ns = 0;
  uint64_t collective_ns = 0, collective_calls = 0, collective_bytes_in = 0;
};

}  // namespace shoal::cluster
