// FailoverExecutor: a RemoteExecutor that survives node loss. On a failed step or a dead link
// it re-plans over the live nodes (a standby takes a dead node's place), assigns the layers at
// the next plan epoch and reports KvLost from Collect, so the engine recomputes every live
// sequence's KV from its tokens and the output goes on exactly as an undisturbed run's
// (docs/CLUSTER.md).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/process_memory.h"
#include "cluster/cluster_control.h"
#include "cluster/failover_stats.h"
#include "cluster/remote_executor.h"

namespace shoal::cluster {

struct FailoverOptions {
  ClusterOptions cluster;                       // nodes: the first plan's, in pipeline order
  std::vector<std::string> standby;             // spares, in the order they replace dead nodes
  std::vector<NodeOverride> standby_overrides;  // [standby] (may be shorter)
  // Probing a node during recovery: connect, authenticate and read its info within this long
  // (0: the suspect time, 300 ms by default: loopback and LAN answer in milliseconds, a stopped
  // process never does, and the probes run in parallel, so this bounds the probe phase).
  int64_t probe_timeout_ms = 0;
  // Between re-planning attempts while the survivors cannot hold the model (each probes every
  // known node again, so a node that joins or restarts is taken within this long).
  int64_t retry_ms = 500;
  // Give up (the engine fails the requests in flight) after this long without a plan; 0: never.
  int64_t give_up_ms = 0;
  // Standbys are probed this often between failovers (connect, authenticate, read the info:
  // one short link per standby), so /v1/cluster shows a lost or restarted standby within about
  // a second; 0: only at failovers.
  int64_t standby_probe_ms = 1'000;
  // A standby that does not answer is probed half as often after each miss, up to this
  // interval, and every standby_probe_ms again once it answers (or joins again): a list of
  // dead or bogus addresses costs one short dial each per minute, not each per second.
  int64_t probe_backoff_max_ms = 60'000;
  // Standbys (joined nodes waiting outside the plan) at most: a join beyond is refused. 64
  // covers any spare pool a pipeline of up to n_layer stages needs, and bounds the probes one
  // caller of the join endpoint can make the coordinator run.
  size_t max_standby = 64;
};

class FailoverExecutor final : public Executor, public ClusterControl {
 public:
  // Builds the first plan over opts.cluster.nodes (failing as ConnectAndPlan does).
  static Result<std::unique_ptr<FailoverExecutor>> Create(const FailoverOptions& opts,
                                                          const gguf::File& file,
                                                          net::ClusterKey key, int64_t n_vocab,
                                                          int64_t n_embd);
  ~FailoverExecutor() override;

  int64_t n_vocab() const override { return n_vocab_; }
  // A failed step (or a drain or rebalance) re-plans; once a plan serves, every step submitted
  // before is void, later submits are ignored, and the next Collect reports KvLost. An error
  // only when no plan can be found (give_up_ms, Stop).
  Status Submit(const StepInput& in) override;
  Status Collect(StepOutput* out) override;
  // KV losses so far (the epoch of the last KvLost).
  uint64_t kv_epoch() const { return kv_epoch_; }

  // Micro-batches per step as a function of the plan's stage count (re-applied per plan).
  void SetMicroBatches(std::function<int32_t(int32_t n_stages)> f);
  // ClusterControl: thread-safe snapshots (the HTTP thread reads them while the engine steps).
  FailoverStats stats() const override;
  std::vector<StageLoad> StageLoads() const override;
  std::vector<std::string> StageNames() const override;
  std::string Unavailable() const override;
  // Thread-safe: removes a node (address or name) from the cluster. At the next step the
  // pipeline re-plans without it (a planned failover: requests in flight replay, none is lost);
  // the node may then be stopped. Error for an unknown node.
  Status Drain(const std::string& node) override;
  // Thread-safe: adds a node (HOST:PORT; a drained one comes back). As a standby it takes a
  // dead node's place at the next failover, or a plan's when the live ones cannot hold it;
  // otherwise the cluster rebalances onto it at the next step (Rebalance), which also takes a
  // node that is a standby already.
  Status Join(const std::string& address, bool standby) override;
  // Thread-safe: at the next step, re-plans over every live node, the plan's and the standbys'
  // (at most one per layer): planned like a drain, so requests in flight replay and none is
  // lost. If that plan cannot be assigned, the nodes that served go on serving.
  void Rebalance() override;
  // Thread-safe: a recovery in progress gives up at its next attempt.
  void Stop() override { stop_ = true; }

 private:
  FailoverExecutor(const FailoverOptions& opts, const gguf::File& file, net::ClusterKey key,
                   int64_t n_vocab, int64_t n_embd);
  // Re-plans until a plan loads (or Stop / give_up_ms); then bumps kv_epoch and records the
  // loss Collect reports. `drain` and
  // `rebalance` are planned re-plans (no failure counted); a rebalance first plans over every
  // live node.
  Status Recover(const Status& why, bool drain = false, bool rebalance = false);
  // One attempt over the members that answer (with rebalance: every live standby in the plan),
  // not probing `skip` (nodes lost during the last attempt). *lost: the nodes that died or went
  // silent while loading this attempt's assignment.
  Status TryPlan(uint32_t epoch, bool rebalance, const std::vector<std::string>& skip,
                 std::vector<std::string>* lost);
  void Install(Cluster cl);  // new inner executor; publishes stages and members
  void WatchStandbys();      // the standby_probe_ms loop (its own thread)
  void CountReplay(const Batch& batch);

  FailoverOptions opts_;
  const gguf::File* file_;
  net::ClusterKey key_;
  int64_t n_vocab_, n_embd_;
  std::function<int32_t(int32_t)> micro_batches_;
  std::unique_ptr<RemoteExecutor> inner_;
  uint64_t kv_epoch_ = 0;
  std::optional<KvLost> lost_;  // a loss not yet reported by Collect
  uint32_t epoch_ = 1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> replan_{false};            // a drain asks for a new plan at the next step
  std::atomic<bool> rebalance_{false};         // a rebalance asks for one
  int32_t n_layer_ = 0;                        // the model's layers (most stages a plan has)
  std::vector<std::string> active_, standby_;  // addresses: the plan's nodes; the spares
  // Replay accounting: per sequence, the KV rows computed before the last failover.
  std::map<int64_t, int32_t> computed_, replay_;

  mutable std::mutex mu_;  // guards everything below (read by other threads)
  FailoverStats stats_;
  std::shared_ptr<StageStats> stage_stats_;
  std::vector<std::string> stage_names_;
  std::map<std::string, std::string> names_;   // address -> node name, once known
  std::map<std::string, std::string> health_;  // address -> last probed health
  std::vector<std::string> drained_;           // addresses removed by Drain
  // Standby probing back-off per address (probe_backoff_max_ms): its interval now and when
  // it is probed next (NowSeconds).
  struct Backoff {
    int64_t interval_ms = 0;
    double next_s = 0;
  };
  std::map<std::string, Backoff> backoff_;
  // Flap damping: a node lost within kFlapPlanS of the plan that placed it, kFlapLimit plans in
  // a row (a relay whose tampering closes every link at the first frame, a node that crashes on
  // every assignment), sits out of plans until `until_s`, for a time that doubles each round.
  struct Flap {
    int short_plans = 0;  // consecutive plans it was lost from within kFlapPlanS
    int rounds = 0;       // quarantines so far
    double until_s = 0;   // NowSeconds() it may be planned again
  };
  std::map<std::string, Flap> flaps_;
  double installed_s_ = 0;  // NowSeconds() of the last Install
  // Records the nodes a failed plan lost, quarantining flapping ones (mu_ held).
  void DampFlaps(const std::vector<std::string>& lost_now);
  // The addresses sitting out of plans now (mu_ held).
  std::vector<std::string> Quarantined();
  bool closing_ = false;  // the standby watch ends
  std::condition_variable watch_cv_;
  std::thread standby_watch_;  // last: started once everything above exists
};

}  // namespace shoal::cluster
