// `shoal node`: a pipeline worker. It measures itself, joins any authenticated coordinator,
// loads the layer range it is assigned (within --mem-limit), and runs micro-batches as they
// arrive, sending hidden states downstream or logits back to the coordinator.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "net/auth.h"
#include "planner/node_info.h"
#include "threading/thread_pool.h"

namespace shoal::cluster {

struct NodeOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;       // 0: ephemeral (see NodeAgent::port)
  uint64_t mem_limit = 0;  // 0: no limit
  int n_threads = 1;
  std::string model_dir = ".";
  std::string cache_dir;  // tensors received from the coordinator; default model_dir/.shoal-cache
  std::string name;       // default: host:port
  bool measure = true;    // probe bandwidth and matmul speed at start
  // Cipher of every link (`--link-cipher`): the coordinator and the other nodes must use the
  // same; a link that does not is refused at its handshake.
  net::LinkCipher link_cipher = net::LinkCipher::kAes256Gcm;
  // Links served at once (`--max-links`); one more is closed at once with a GOODBYE. A node
  // serves a few (its coordinator, its upstream stage, probes during a failover, fetches); 64
  // leaves room for a coordinator's probe bursts while bounding what a flood of connections
  // takes (a thread and ~300 KiB of buffers each).
  int max_links = 64;
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
planner::NodeInfo MeasureNode(const std::string& name, const std::string& address,
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

}  // namespace shoal::cluster
