// Node description: what a `shoal node` reports on join (memory limit, measured speeds, links).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace shoal::planner {

struct NodeInfo {
  std::string name;        // e.g. "n2"
  std::string address;     // "host:port"
  uint64_t mem_limit = 0;  // bytes the process may use (--mem-limit), hard
  double mem_bw = 0;       // measured memory bandwidth, bytes/s (STREAM triad)
  // Measured matmul throughput per weight type, flops/s (2 per multiply-add), for a batch large
  // enough to be compute-bound. A type not listed uses the slowest listed type; with none listed
  // the planner treats the node as memory-bound only.
  std::vector<std::pair<DType, double>> matmul_flops;
  std::string isa;        // e.g. "avx2", "avx512", "neon"
  int32_t n_threads = 1;  // compute threads (sizes the per-thread attention scratch)
  // Outgoing link to the next stage; 0 = PlanConfig's default.
  double link_bw = 0;         // bytes/s
  double link_latency_s = 0;  // one way, seconds

  // Throughput for weights of `type` by the rule above (0 when nothing is listed).
  double FlopsFor(DType type) const;
};

// Checks the fields a plan relies on (limit and bandwidth > 0, finite non-negative speeds).
Status ValidateNode(const NodeInfo& n);

// JSON round trip. Types are written by ggml name ("q4_0"); unknown keys are ignored, known keys
// of the wrong type or value are errors naming the key. Never throws.
std::string NodeInfoToJson(const NodeInfo& n);
Result<NodeInfo> NodeInfoFromJson(const std::string& json);

}  // namespace shoal::planner
