// `shoal node`: a pipeline worker. It measures itself, joins any authenticated coordinator,
// loads the layer range it is assigned (within --mem-limit), and runs micro-batches as they
// arrive, sending hidden states downstream or logits back to the coordinator.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "net/auth.h"
#include "planner/node_info.h"
#include "threading/thread_pool.h"

namespace shoal::dist {

struct NodeOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;       // 0: ephemeral (see NodeAgent::port)
  uint64_t mem_limit = 0;  // 0: no limit
  int n_threads = 1;
  std::string model_dir = ".";
  std::string cache_dir;  // tensors received from the coordinator; default model_dir/.shoal-cache
  std::string name;       // default: host:port
  bool measure = true;    // probe bandwidth and matmul speed at start
};

class NodeAgent {
 public:
  static Result<std::unique_ptr<NodeAgent>> Start(const NodeOptions& opts, net::ClusterKey key);
  ~NodeAgent();
  uint16_t port() const;
  const planner::NodeInfo& info() const;
  // Serves until Stop() (thread-safe; e.g. from a signal watcher).
  Status Run();
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Measures this machine for NodeInfo: STREAM-triad bandwidth on arrays small enough for a
// 256 MiB node, the decode weight-streaming rate, matmul throughput per weight type, and the
// attention kernel's speed at `head_dim` (the model's, where the caller knows it).
planner::NodeInfo MeasureNode(const std::string& name, const std::string& address,
                              uint64_t mem_limit, int n_threads, int head_dim = 128);
// Bytes/s at which MatMul reads pretiled Q4_0 weights from DRAM for `tokens` tokens (63 MiB of
// matrices per round; 0 when the memory cannot be mapped).
double MeasureWeightStream(ThreadPool* pool, int64_t tokens);
// Flops/s of one decode query head attending over an F16 cache (planner's flop count).
double MeasureAttentionFlops(int head_dim);

}  // namespace shoal::dist
