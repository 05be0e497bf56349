// The state of a failover pipeline as the coordinator sees it: plan, members and counters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/process_memory.h"
#include "cluster/node_load.h"
#include "planner/plan.h"

namespace shoal::cluster {

// One node as the coordinator sees it.
struct MemberState {
  std::string address, name;
  std::string role;    // "stage N", "standby" or "spare" (alive, outside the plan)
  std::string health;  // alive, suspect, dead, or unknown (a standby not probed yet)
};

struct FailoverStats {
  uint32_t epoch = 0;
  int64_t failovers = 0;
  int64_t drains = 0;
  int64_t rebalances = 0;       // planned re-plans onto every live node (Rebalance, Join)
  int64_t replayed_tokens = 0;  // prompt and generated tokens recomputed after failovers
  double last_recovery_s = 0;   // failure detected -> new plan loaded
  double recovery_s_total = 0;  // sum over failovers
  double recovery_s_max = 0;
  std::string last_failure;  // why the last failover began
  std::string unavailable;   // non-empty while no plan fits: new requests get 503
  std::vector<MemberState> members;
  planner::Plan plan;                        // the current plan
  std::vector<std::string> stage_addresses;  // [stage]
  // [stage]: the node's RSS and peak RSS from its last heartbeat answer (zeros before one).
  std::vector<ProcessMemory> stage_memory;
  // [stage][member] of a split stage (one entry for a stage on one node): addresses, memory and
  // load counters from the last heartbeat answers.
  std::vector<std::vector<std::string>> member_addresses;
  std::vector<std::vector<ProcessMemory>> member_memory;
  std::vector<std::vector<NodeLoad>> member_load;
  std::vector<std::vector<NodeLoadRate>> member_rate;  // over the last 10 s
};

}  // namespace shoal::cluster
