// What a server sees of a distributed engine: its live state and the admin's operations. The
// failover pipeline implements it today; replicas and tensor-parallel groups will too.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/failover_stats.h"
#include "cluster/stage_stats.h"

namespace shoal::cluster {

// Every method is thread-safe: the HTTP thread calls them while the engine thread steps.
class ClusterControl {
 public:
  virtual ~ClusterControl() = default;
  // The plan, members, failover counters and per-stage memory now.
  virtual FailoverStats stats() const = 0;
  // Measured load per stage of the current plan, and the stages' node names.
  virtual std::vector<StageLoad> StageLoads() const = 0;
  virtual std::vector<std::string> StageNames() const = 0;
  // Why new requests are refused now ("" while serving).
  virtual std::string Unavailable() const = 0;
  // Takes a node (address or name) out; requests in flight replay, none is lost.
  virtual Status Drain(const std::string& node) = 0;
  // Adds a node (HOST:PORT): as a standby, or rebalanced onto at the next step.
  virtual Status Join(const std::string& address, bool standby) = 0;
  // Re-plans over every live node at the next step.
  virtual void Rebalance() = 0;
  // A recovery in progress gives up at its next attempt (the server is shutting down).
  virtual void Stop() = 0;
};

}  // namespace shoal::cluster
