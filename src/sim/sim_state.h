// Simulator state without SimGrid types in its logic: requests, replicas, lanes (one Scheduler
// each), stage costs from the planner, failure handling and the report.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "kvcache/block_allocator.h"
#include "sched/scheduler.h"
#include "sim/sim.h"

namespace simgrid::s4u {
class Host;
}

namespace shoal::sim {

// Host speed in the platform: Execs are sized in seconds x this (any unit works; 1e9 keeps
// SimGrid's doubles well inside their precision for microsecond steps).
inline constexpr double kHostSpeed = 1e9;

// One simulated client request: arrival, first token, completion (the engine's is shoal::Request).
struct SimRequest {
  int64_t id = 0;
  double arrival = 0, first_token = -1, done = -1;
  double affected_at = -1;  // a failure voided its KV here; the next token ends the recovery
  int32_t generated = 0;
  std::vector<int32_t> tokens;  // prompt + generated: what the coordinator keeps
};

struct Replica {
  int32_t index = 0;
  bool alive = true;
  int64_t epoch = 0;
  double ready_at = 0;           // replacement loaded and KV rebuildable from here
  double failed_at = -1;         // last failure not yet recovered (-1: none)
  std::vector<int64_t> members;  // host indices, stage by stage
  std::vector<int64_t> primary;  // per stage: the host that runs its activities
  double in_step_s = 0;          // time with a step in flight (replica 0: bubbles)
};

struct State;

struct Lane {
  Replica* rep = nullptr;
  std::unique_ptr<BlockAllocator> alloc;
  std::unique_ptr<Scheduler> sched;
  FakeClock clock;
  std::deque<int64_t> queue;  // request ids assigned to this lane, by arrival
  std::vector<int64_t> live;  // request ids in the scheduler
  int32_t max_seqs = 1;

  void Admit(State* s, double now);
  double NextArrival(const State* s) const;
  void LoseKv(State* s);
  void Orphan(State* s);
  void Complete(State* s, const StepPlan& plan, double now);
  void Release(State* s, double now);  // closed loop: the next pending request joins this lane
};

struct State;
Status BuildPlatform(State* s);  // platform.cc: hosts, coordinator and links by opt.topology

struct State {
  SimOptions opt;
  planner::ModelProfile model;
  planner::DevicePreset device;
  planner::CapacityReport plan;
  std::vector<planner::StageSpec> stages;
  uint64_t row_bytes = 0;
  std::vector<SimRequest> requests;
  std::deque<int64_t> orphans;  // requests of retired replicas, waiting for another lane
  std::vector<Replica> replicas;
  std::deque<Lane> lanes;
  std::vector<simgrid::s4u::Host*> hosts;
  simgrid::s4u::Host* coordinator = nullptr;
  // opt.host_cores > 0: the shared machine, one single-core host per core (see PickCore).
  std::vector<simgrid::s4u::Host*> cores;
  std::vector<int32_t> core_execs;  // execs computing on each core now
  // Where each stage, the coordinator, then each split stage's members 1.. last ran.
  std::vector<size_t> last_core;
  std::vector<int64_t> spares;                 // host indices
  std::unordered_map<int64_t, int32_t> owner;  // host index -> replica
  std::vector<uint8_t> dead;
  std::mt19937_64 rng;
  SimReport report;
  std::vector<double> recoveries;
  double last_done = 0;  // completion time of the last request
  // Decode step costs by batch: decode_cost[stage][b] (steps with prompt rows are priced as met).
  std::vector<std::vector<planner::StepCost>> decode_cost;

  Status Init(const planner::ModelProfile& m, const planner::DevicePreset& d, const SimOptions& o);
  void AssignHosts();
  // One micro-batch of `decode` sequences and `prefill` prompt rows, `sampled` rows of logits;
  // with prompt rows, every row attends to `ctx` positions on average.
  planner::StepCost Cost(size_t stage, int32_t decode, int32_t prefill, int32_t sampled,
                         double ctx);
  double HopSeconds(uint64_t bytes) const;  // transfer at the node's link rate + latency
  void FailRandomHost(double now);
  uint64_t ReturnBytes(int32_t sampled) const;  // logits of the sampled rows to the coordinator
  // opt.host_cores > 0: the core stage `who` (stages.size(): the coordinator) computes its next
  // exec on, as the kernel wakes a thread: its last core, unless that one is computing and
  // another computes less. An exec stays on its core until done.
  size_t PickCore(size_t who);
  // PickCore's slot of member k >= 1 of split stage i (member 0 is the stage's own slot i).
  size_t MemberSlot(size_t stage, int64_t k) const;
  void Finalize();
};

}  // namespace shoal::sim
