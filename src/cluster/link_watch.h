// LinkWatch: the coordinator's reader of its node links. One thread per link pings the node,
// records every frame heard in a HeartbeatMonitor and queues step results and control messages,
// so a dead or silent node fails the step, or the assignment it is loading, in a bounded time
// instead of hanging it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/process_memory.h"
#include "base/status.h"
#include "cluster/node_load.h"
#include "net/conn.h"
#include "net/heartbeat.h"

namespace shoal::cluster {

// Failure detection thresholds (docs/CLUSTER.md, "Failover").
struct WatchConfig {
  // The coordinator pings every link this often and the node's link thread answers at once
  // (also while its compute thread runs a long step). 100 ms: ~0.4 kB/s per link, and a
  // suspicion within a few pings.
  int64_t heartbeat_ms = 100;
  // Silence before a node is suspect (3 pings lost: not one late packet)...
  int64_t suspect_ms = 300;
  // ...and dead: 1 s detects a crashed machine within 1 s on a LAN; a closed socket (a killed
  // process) is death at once. A node silent for less (SIGSTOP, overload) only waits.
  int64_t dead_ms = 1000;
};

// Error unless 0 < heartbeat_ms <= suspect_ms < dead_ms.
Status CheckWatchConfig(const WatchConfig& c);

class LinkWatch {
 public:
  // Starts watching the links (names[i] names conns[i] in errors and states). The caller must
  // not Recv on them afterwards.
  LinkWatch(std::vector<std::shared_ptr<net::Conn>> conns, std::vector<std::string> names,
            const WatchConfig& config);
  ~LinkWatch();
  LinkWatch(const LinkWatch&) = delete;
  LinkWatch& operator=(const LinkWatch&) = delete;

  // The next step result from link i; an error as soon as any link is dead (closed, failed or
  // silent past dead_ms) or when none came within timeout_ms.
  Result<net::Frame> NextResult(size_t i, int64_t timeout_ms);
  // The next control message from any link (assignment results, fetch requests), with the
  // link's index; errors as NextResult.
  struct Control {
    size_t link = 0;
    net::Frame frame;
  };
  Result<Control> NextControl(int64_t timeout_ms);
  // Every link's health now, in link order (peer = its name).
  std::vector<net::HeartbeatMonitor::PeerState> States() const;
  // Every node's memory as its last heartbeat answer reported it, in link order (zeros until
  // one arrives).
  std::vector<ProcessMemory> Memory() const;
  // Every node's load counters from its last heartbeat answer, in link order.
  std::vector<NodeLoad> Load() const;
  // Every node's load over the last 10 s, from its heartbeat answers, in link order.
  std::vector<NodeLoadRate> LoadRates() const;
  // Why the first dead link is dead; "" while all live.
  std::string DeadReason() const;
  // Shuts every link down and joins the threads (idempotent).
  void Stop();

 private:
  void Serve(size_t i);
  // DeadReason, and a link found dead by silence is shut down, so that a send blocked on it (a
  // stopped node with a full socket buffer) fails at once.
  std::string CheckDead();
  // Waits for `ready` (called under mu_) until any link is dead or timeout_ms passes.
  template <typename Ready>
  Status WaitFor(Ready ready, int64_t timeout_ms, const std::string& what);

  std::vector<std::shared_ptr<net::Conn>> conns_;
  std::vector<std::string> names_;
  WatchConfig config_;
  SteadyClock clock_;
  net::HeartbeatMonitor monitor_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::deque<net::Frame>> results_;  // [link], guarded by mu_
  std::deque<Control> controls_;                 // guarded by mu_
  std::vector<ProcessMemory> memory_;            // [link], guarded by mu_
  std::vector<NodeLoad> load_;                   // [link], guarded by mu_
  std::vector<NodeLoadWindow> windows_;          // [link], guarded by mu_
  std::string dead_;                             // guarded by mu_
  bool stop_ = false;                            // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace shoal::cluster
