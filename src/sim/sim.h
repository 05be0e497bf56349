// Cluster simulator (`shoal sim`): the planner's placement and the real scheduler (src/sched)
// driving simulated stage compute and transfers on a SimGrid platform, with host failures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "planner/capacity.h"

namespace shoal::sim {

struct Workload {
  double rate = 1.0;     // requests per second (Poisson arrivals)
  int32_t in = 512;      // prompt tokens
  int32_t out = 128;     // generated tokens
  int32_t closed = 0;    // > 0: closed loop, this many requests in flight (rate unused)
  int64_t requests = 0;  // closed loop: requests in all (0 = as many as the duration allows)
};
// "poisson:RATE,in:LEN,out:LEN" or "closed:B,requests:N,in:LEN,out:LEN" (any order).
Result<Workload> ParseWorkload(const std::string& s);
// "10m", "90s", "2h", "600" (seconds).
Result<double> ParseDuration(const std::string& s);

struct SimOptions {
  int64_t nodes = 0;
  std::string topology = "star";
  Workload workload;
  double mtbf_hours = 0;  // per node; 0 = no failures
  double duration_s = 600;
  uint64_t seed = 1;
  int32_t context = 4096;   // KV reserved per sequence
  int32_t concurrency = 0;  // sequences in flight in total; 0 = 64 per replica
  int32_t lanes = 0;        // micro-batch lanes per replica; 0 = the planner's micro-batches
  // Seconds to bring a spare in: its share of the weights over its link, plus this.
  double respawn_s = 1.0;
  int32_t stages = 0;          // whole-layer stages per replica (0: the planner's fewest)
  double step_overhead_s = 0;  // per engine step, outside the stages (tools/calibrate)
  // As planner::CapacityOptions::pipeline_groups: 1 = each replica has one step in flight, cut
  // into micro-batches; more = lanes step independently, so consecutive steps overlap in the
  // pipeline; 0 = `shoal serve`'s default (one group per stage, 1 for recurrent models).
  int32_t pipeline_groups = 0;
  // As planner::CapacityOptions::host_cores: the stages' compute runs on one simulated machine
  // of this many cores (links stay per node); 0 = each node computes on its own host.
  int32_t host_cores = 0;
  // As planner::CapacityOptions::tp, tp_fast and collective_s: every stage a tensor-parallel
  // group of tp members (each its own host; on --host-cores, each member computes on a core).
  int32_t tp = 1;
  bool tp_fast = false;
  double collective_s = 0;
  planner::LinkDType link_dtype = planner::LinkDType::kF16;  // activations on the wire
  // Of the network stacks' CPU for a hop's bytes (measure::NodeInfo::link_cpu_s_per_byte), the
  // share the sending stage's own thread spends in its send, holding the stage; the rest (the
  // kernel's softirq and the receiver's read) runs on a core beside it while the bytes are on the
  // wire. 1 = all on the sending stage, as plan prices it. For 128 KiB messages the sender's write
  // took 0.40-0.44 of it on loopback and 0.15-0.23 through the 1 Gbit/s shaper at MTU 1500
  // (tools/calibrate measures it).
  double link_cpu_send_share = 1;
};

struct Dist {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  int64_t n = 0;
};

struct SimReport {
  std::string model, device, topology;
  int64_t nodes = 0, hosts = 0, replicas = 0, nodes_per_replica = 0, stages = 0, lanes = 0;
  double duration_s = 0;
  int64_t requests_arrived = 0, requests_done = 0;
  int64_t tokens_generated = 0, prompt_tokens = 0;
  double throughput_tps = 0;
  Dist ttft_s, tpot_s, e2e_s;
  std::vector<double> stage_util;    // busy fraction per stage of replica 0
  std::vector<double> stage_bubble;  // idle fraction of replica 0's in-step time, per stage
  double mean_util = 0, mean_bubble = 0;
  int64_t failures = 0, failovers = 0, spares_used = 0, replicas_lost = 0;
  Dist recovery_s;  // failure to the next token of each request it interrupted
  int64_t tokens_lost = 0, tokens_duplicated = 0;
  int64_t activities = 0;
  double wall_s = 0;
  double plan_decode_tps = 0;  // the planner's closed-form aggregate, for comparison
  double plan_served_tps = 0;  // the planner's served tokens/s (prefill included)
  bool closed = false;
  double end_s = 0;  // closed loop: when the last request finished (throughput's divisor)
};

// Runs one simulation (SimGrid allows one engine per process). Errors are values; SimGrid's
// exceptions stay inside.
Result<SimReport> RunSim(const planner::ModelProfile& model, const planner::DevicePreset& device,
                         const SimOptions& opt);
std::string FormatSimReport(const SimReport& r);
std::string SimReportToJson(const SimReport& r);

}  // namespace shoal::sim
