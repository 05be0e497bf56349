// Node description: what a `shoal node` reports on join (memory limit, measured speeds, links).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace shoal::measure {

struct NodeInfo {
  std::string name;        // e.g. "n2"
  std::string address;     // "host:port"
  uint64_t mem_limit = 0;  // bytes the process may use (--mem-limit), hard
  double mem_bw = 0;       // measured memory bandwidth, bytes/s (STREAM triad)
  // Rate at which decode's matmul kernels read weights from DRAM, bytes/s: one token over
  // matrices well past the last-level cache. Below the triad on CPUs (one core here streamed
  // 16.5 GB/s of Q4_0 where its triad read 26 GB/s: the kernel also unpacks and multiplies).
  // 0 = mem_bw (presets without a measurement).
  double weight_bw = 0;
  // The same rate for 1, 2, 4 and 8 tokens (entry i: 2^i tokens), where measured: a few tokens
  // cost more than one and less than the compute roofline says (one core here read Q4_0 at
  // 17.7, 16.8, 12.5 and 10.8 GB/s for 1, 2, 4, 8 tokens). Empty = weight_bw at any batch.
  std::vector<double> weight_bw_batch;
  // The same table for other weight types, where measured (entry i: 2^i tokens): kernels that
  // dot one token at a time read several tokens' worth no faster than one each (one core here
  // read Q6_K at 20, 10, 6 and 2.8 GB/s for 1, 2, 4, 8 tokens, Q4_0 at 24, 20, 11.5, 8).
  // A type not listed streams as weight_bw_batch says.
  std::vector<std::pair<DType, std::vector<double>>> type_bw_batch;
  // Cached attention of one decode query, flops/s (2 (dk + dv) per head and position);
  // 0 = the F32 matmul rule below.
  double attn_flops = 0;
  // Measured matmul throughput per weight type, flops/s (2 per multiply-add), for a batch large
  // enough to be compute-bound. A type not listed uses the slowest listed type; with none listed
  // the planner treats the node as memory-bound only.
  std::vector<std::pair<DType, double>> matmul_flops;
  // How much slower a core of this node's machine streams weights while every core streams
  // its own at once, at 1, 2, 4, 8 tokens (entry i: 2^i tokens; >= 1): what stages that share
  // one machine's memory bus see when they compute together (two 1-thread stages on a 2-core
  // Zen 4 VM: 1.4, 1.2, 1.1, 1.05). Empty = not measured (each node its own machine).
  std::vector<double> corun_slowdown;
  std::string isa;        // e.g. "avx2", "avx512", "neon"
  int32_t n_threads = 1;  // compute threads (sizes the per-thread attention scratch)
  // Outgoing link to the next stage; 0 = PlanConfig's default.
  double link_bw = 0;         // bytes/s
  double link_latency_s = 0;  // one way, seconds
  // CPU seconds the network stacks at both ends spend per byte sent over that link (copies,
  // checksums, interrupts, a shaper's queue), on the sending stage's time; 0 = free. On the
  // Zen 4 VM `tools/calibrate` measured 0.5-0.7 ns on loopback and 8.7-9.3 through a 1 Gbit/s
  // tc shaper at MTU 1500: a 2-sequence step's 256 KiB of logits then costs its stage ~2.4 ms.
  double link_cpu_s_per_byte = 0;

  // Throughput for weights of `type` by the rule above (0 when nothing is listed).
  double FlopsFor(DType type) const;
  // The weight-streaming rate at `tokens` tokens: interpolated in log2(tokens) over
  // weight_bw_batch, its last entry beyond it (larger batches are priced by the compute
  // roofline); without a table, weight_bw, else mem_bw.
  double WeightBw(double tokens = 1) const;
  // The rate for weights of `type` (its type_bw_batch table, else WeightBw(tokens)).
  double WeightBw(double tokens, DType type) const;
  // Attention flops/s by the rule above (0: not counted).
  double AttnFlops() const { return attn_flops > 0 ? attn_flops : FlopsFor(DType::kF32); }
};

// The node as a stage sees it while the other cores of its machine compute too: weight
// streaming at each batch, and the triad, slower by corun_slowdown at that batch; matmul and
// attention throughput by its last entry (the most compute-bound batch). `n` itself without a
// corun_slowdown table.
NodeInfo CoRunning(const NodeInfo& n);

// Checks the fields a plan relies on (limit and bandwidth > 0, finite non-negative speeds).
Status ValidateNode(const NodeInfo& n);

// JSON round trip. Types are written by ggml name ("q4_0"); unknown keys are ignored, known keys
// of the wrong type or value are errors naming the key. Never throws.
std::string NodeInfoToJson(const NodeInfo& n);
Result<NodeInfo> NodeInfoFromJson(const std::string& json);

}  // namespace shoal::measure
