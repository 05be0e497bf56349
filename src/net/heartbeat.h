// HeartbeatMonitor: last-heard time per peer; suspect/dead after N missed intervals.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace shoal::net {

enum class PeerHealth { kAlive, kSuspect, kDead };
const char* PeerHealthName(PeerHealth h);

struct HeartbeatConfig {
  // Peers send a heartbeat every interval. 1 s: a pipeline step takes milliseconds, so a dead
  // stage stalls every request; detection within seconds matters more than the ~40 bytes/s.
  int64_t interval_us = 1'000'000;
  // Missed intervals before a peer is suspect (2: one late packet is not a suspicion)...
  int suspect_after = 2;
  // ...and dead (5: a node swapping or in a GC-like pause gets a few seconds before failover).
  int dead_after = 5;
};

// Any frame from a peer counts as hearing it (data frames are heartbeats too). Time comes only
// from the injected Clock. Death is sticky: once dead, a peer stays dead until Remove/Add, since
// failover has started by then. Thread-safe (link threads report, a monitor thread checks).
class HeartbeatMonitor {
 public:
  struct PeerState {
    std::string peer;
    PeerHealth health = PeerHealth::kAlive;
    int64_t last_heard_us = 0;
    int64_t missed_intervals = 0;
  };

  // Error if the config is not positive and ordered (suspect_after < dead_after).
  static Result<HeartbeatMonitor> Create(const Clock* clock, const HeartbeatConfig& config = {});

  HeartbeatMonitor(HeartbeatMonitor&& other) noexcept;

  // Starts tracking `peer` as heard now (re-adding resets a dead peer).
  void Add(const std::string& peer);
  void Remove(const std::string& peer);
  // Records that something arrived from `peer` now; unknown peers are ignored.
  void Heard(const std::string& peer);
  // Health now; error for an unknown peer.
  Result<PeerHealth> Health(const std::string& peer) const;
  // Every peer's state now, ordered by name.
  std::vector<PeerState> Check() const;
  // Whether an own heartbeat is due on a link last written at `last_sent_us`.
  bool SendDue(int64_t last_sent_us) const;

 private:
  HeartbeatMonitor(const Clock* clock, const HeartbeatConfig& config)
      : clock_(clock), config_(config) {}
  PeerState StateLocked(const std::string& peer, int64_t last_heard_us, bool dead) const;

  struct Entry {
    int64_t last_heard_us = 0;
    mutable bool dead = false;  // latched the first time the peer is seen dead
  };
  const Clock* clock_;
  HeartbeatConfig config_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> peers_;
};

}  // namespace shoal::net
