// Node self-measurement: what a machine reports to the planner (memory bandwidth, weight
// streaming per type, co-running slowdown, attention speed), with the real kernels at a model's
// shapes. Used by `shoal node` (it reports the figures when it joins) and by `shoal plan
// --device local`; it needs no cluster runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "measure/node_info.h"
#include "tensor/dtype.h"
#include "threading/thread_pool.h"

namespace shoal::measure {

// The model a node is measured for: the attention kernel at its head width, weight streaming
// through one decoder layer's dense matrices. The defaults are Llama 3.1 8B's.
struct MeasureShape {
  int head_dim = 128;
  int64_t n_embd = 4096, n_ff = 14336, q_rows = 4096, kv_rows = 1024;
  // Weight types besides Q4_0 whose streaming rate per batch to measure (the model's: a Q4_0
  // file's Q6_K output head, say); NodeInfo::type_bw_batch.
  std::vector<DType> types;
};

// Measures this machine for NodeInfo: STREAM-triad bandwidth on arrays small enough for a
// 256 MiB node, the decode weight-streaming rate, matmul throughput per weight type, and the
// attention kernel's speed, at the shapes of `shape` (the model's, where the caller knows it).
measure::NodeInfo MeasureNode(const std::string& name, const std::string& address,
                              uint64_t mem_limit, int n_threads, const MeasureShape& shape = {});
// Bytes/s at which MatMul reads `type` weights (Q4_0 pretiled) from DRAM for `tokens` tokens: one
// decoder layer's matrices of `shape`, in order, repeated to ~64 MiB a round (0 when the
// memory cannot be mapped).
double MeasureWeightStream(ThreadPool* pool, int64_t tokens, const MeasureShape& shape = {},
                           DType type = DType::kQ4_0);
// How much slower one core streams Q4_0 weights (`shape`'s layer) while each of `cores` cores
// streams its own at once, at 1, 2, 4 and 8 tokens: the median round together over the median
// round alone, >= 1 (empty when cores < 2 or memory cannot be mapped). Stages that share one
// machine's memory bus see it (NodeInfo::corun_slowdown).
std::vector<double> MeasureCoRunSlowdown(const MeasureShape& shape, int cores);
// Flops/s of one decode query head attending over an F16 cache (planner's flop count).
double MeasureAttentionFlops(int head_dim);

}  // namespace shoal::measure
