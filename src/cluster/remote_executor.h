// The coordinator's side of the pipeline: connecting to nodes, planning, assigning layers, and
// an Executor that streams each engine step through the stages as micro-batches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_file.h"
#include "cluster/link_watch.h"
#include "cluster/model_transfer.h"
#include "cluster/stage_stats.h"
#include "cluster/wire.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "net/auth.h"
#include "net/conn.h"
#include "planner/parallel.h"
#include "planner/plan.h"

namespace shoal::cluster {

struct ClusterOptions {
  std::vector<std::string> nodes;       // "host:port", in pipeline order
  std::vector<NodeOverride> overrides;  // [node] (may be shorter): name, memory cap, link
  std::string model_file;               // file name the nodes find in their --model-dir
  planner::PlanConfig plan;             // sizes (max seqs, length, block size, KV and link types)
  // A forced layout (`--parallel`): tensor-parallel groups of consecutive nodes as the stages;
  // the default {tp 1, pp 0} plans a pipeline of every node.
  planner::Parallel parallel;
  int32_t swap_blocks = 0;
  int64_t connect_timeout_ms = 10'000;
  WatchConfig watch;  // failure detection on every link (link_watch.h)
  // Cipher of every link to the nodes (`--link-cipher`); each node must use the same.
  net::LinkCipher link_cipher = net::LinkCipher::kAes256Gcm;
};

// Authenticated links to every node with the plan made from their reported NodeInfo.
struct Cluster {
  std::vector<std::shared_ptr<net::Conn>> conns;  // [node]
  std::vector<measure::NodeInfo> infos;
  planner::Plan plan;
  int32_t n_blocks = 0;              // KV blocks per stage (the engine's pool size)
  uint32_t epoch = 1;                // plan epoch: every assignment and data frame carries it
  const gguf::File* file = nullptr;  // the coordinator's model (sent to nodes that lack it)
  ModelManifest manifest;            // its per-tensor hashes
  // Watches every link from the assignment on (AssignLayers starts it; the RemoteExecutor
  // keeps it), so a node that stops while it loads fails the assignment within dead_ms.
  std::shared_ptr<LinkWatch> watch;
};

// One authenticated link and the node's reported info (with `override` applied).
struct NodeLink {
  std::shared_ptr<net::Conn> conn;
  measure::NodeInfo info;
};
Result<NodeLink> ConnectNode(const std::string& address, const NodeOverride& override,
                             const net::ClusterKey& key, int64_t timeout_ms,
                             net::LinkCipher cipher = net::LinkCipher::kAes256Gcm);

// Plans the layer split over these links (in pipeline order; groups of opts.parallel.tp nodes).
Result<Cluster> PlanCluster(std::vector<NodeLink> links, const ClusterOptions& opts,
                            const gguf::File& file);

// The nodes of a stage in member order (its one node when not split).
std::vector<int32_t> StageNodes(const planner::Stage& st);

// Connects to the nodes, reads their node info and plans the layer split (fails with each
// node's shortfall when the model does not fit).
Result<Cluster> ConnectAndPlan(const ClusterOptions& opts, const gguf::File& file,
                               const net::ClusterKey& key);

// Sends every node its assignment and waits until all have loaded (or one refuses); a node
// that lacks the model file fetches its tensors meanwhile (ServeFetch). The links are watched
// meanwhile (opts.watch, in cluster.watch): a node answers pings while it loads, so a node
// silent for dead_ms (stopped, or its machine gone) fails the assignment, while a slow load
// that keeps answering may take up to 10 minutes. *lost (when given) gets the addresses of the
// nodes whose links died or went silent meanwhile (a re-plan without them may work at once);
// it stays empty when a node refused its assignment.
Status AssignLayers(Cluster& cluster, const ClusterOptions& opts,
                    std::vector<std::string>* lost = nullptr);

// Streams a step through the stages: its batch is cut into micro-batches of whole chunks (by
// default one per stage), all sent to stage 0 at once (to every member of a split stage 0), so that
// stage s works on micro-batch i while stage s+1 works on i-1; the last stage returns logits. The
// step's copies ride on the first micro-batch. Submit/Collect keep several steps in flight (the
// engine's pipeline groups): each stage works in arrival order, so results return first in, first
// out. A lost node fails Submit or Collect with an error (FailoverExecutor turns that into KvLost).
class RemoteExecutor final : public Executor {
 public:
  // Watches every link from here on (link_watch.h; cluster.watch when AssignLayers started
  // one, else a new one with `watch`): a dead node fails the step in flight.
  RemoteExecutor(Cluster cluster, int64_t n_vocab, int64_t n_embd, const WatchConfig& watch = {});
  ~RemoteExecutor() override;
  int64_t n_vocab() const override { return n_vocab_; }
  Status Submit(const StepInput& in) override;
  Status Collect(StepOutput* out) override;
  // Micro-batches per step (at least 1, never more than the step's chunks; default: stages).
  // With steps of several groups in flight, 1: the other groups fill the pipeline.
  void SetMicroBatches(int32_t n) { micro_batches_ = std::max(1, n); }
  // Measured per-stage load (thread-safe; outlives the executor when held).
  std::shared_ptr<StageStats> stage_stats() const { return stats_; }
  const Cluster& cluster() const { return cluster_; }
  // Health of every node link now, in node order.
  std::vector<net::HeartbeatMonitor::PeerState> LinkStates() const { return watch_->States(); }
  // Each stage's node memory from its last heartbeat answer, in stage order.
  std::vector<ProcessMemory> LinkMemory() const { return watch_->Memory(); }
  // Each node's load counters from its last heartbeat answer, in node order.
  std::vector<NodeLoad> LinkLoad() const { return watch_->Load(); }
  std::vector<NodeLoadRate> LinkLoadRates() const { return watch_->LoadRates(); }

 private:
  struct Pending {
    uint64_t step = 0;
    std::vector<size_t> out_counts;  // logit rows per micro-batch
    std::vector<int64_t> rows;       // rows per micro-batch
  };
  Cluster cluster_;
  std::shared_ptr<LinkWatch> watch_;
  std::shared_ptr<StageStats> stats_;
  int64_t n_vocab_, n_embd_;
  int32_t micro_batches_ = 1;
  uint64_t step_ = 0;
  StepWork work_;                // the micro-batch being encoded (its buffers kept)
  std::deque<Pending> pending_;  // submitted, not yet collected; oldest first
  std::vector<float> part_;
  std::vector<uint32_t> stage_us_;
};

}  // namespace shoal::cluster
