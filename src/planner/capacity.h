// Capacity planning (`shoal plan`): how many of one device a model needs, how it is placed
// (whole layers per node, or a layer split over a group of nodes: experts spread, dense tensors
// sharded) and how fast it runs, from the cost model (cost_model.h) and MakePlan (plan.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "planner/cost_model.h"
#include "planner/model_profile.h"
#include "planner/plan.h"
#include "planner/presets.h"

namespace shoal::planner {

struct CapacityOptions {
  int64_t nodes = 0;           // devices available; 0 = the fewest that hold weights + KV
  int32_t context = 8192;      // tokens per sequence (prompt + output): the KV each one reserves
  int32_t concurrency = 1;     // sequences in flight in total
  int32_t prompt = 0;          // prompt tokens for TTFT (0 = context / 2)
  int32_t batch_tokens = 512;  // prefill chunk (shrunk while buffers > 1/4 of a node)
  LinkDType link_dtype = LinkDType::kF16;
  // Whole-layer pipeline stages per replica; 0 = the fewest that fit (calibration forces 1, 2,
  // 4 to compare with `shoal cluster up --nodes N`).
  int32_t stages = 0;
  // Tokens generated per request; > 0 prices decode at the mean context prompt + output / 2 and
  // reports served tokens/s (prefill included) for `concurrency` requests of prompt + output.
  int32_t output = 0;
  // Seconds every engine step costs outside the stages' forward passes (coordinator scheduling
  // and sampling, framing, thread hand-offs); measured by tools/calibrate, 0 = not counted.
  double step_overhead_s = 0;
  // Sequence groups per replica, each with its own step in flight (`shoal serve
  // --pipeline-groups`): 1 = one step at a time, cut into min(stages, sequences) micro-batches
  // that fill and drain the pipeline every step; G > 1 = G groups whose steps overlap, each step
  // cut into max(1, stages / G) micro-batches; 0 = what `shoal serve` does by default: one
  // group per stage, or 1 for models with recurrent state (their slots belong to one group).
  int32_t pipeline_groups = 0;
  // Cores of one machine that every stage shares (`shoal cluster up` on one box: S one-thread
  // nodes on C cores); 0 = each node is its own machine. A round then lasts at least the
  // stages' summed work over min(C, S) cores.
  int32_t host_cores = 0;
  // Members of every stage's tensor-parallel group (`--parallel tp=T`: whole-layer stages, each
  // split over T nodes as the runtime splits them); 1: whole stages. tp_fast: `--tp-mode fast`.
  int32_t tp = 1;
  bool tp_fast = false;
  // Seconds one collective call costs beyond its bytes (the members' meeting: a message each
  // way, wake-ups, the wait for the slowest); 0: the link's one-way latency. tools/calibrate
  // measures it.
  double collective_s = 0;
};

// One pipeline stage of a replica: a range of layers on one node; a range split over a group of
// `dense_nodes` members as the runtime splits it (`--parallel tp=T`: every member holds a slice
// of every layer, planner/parallel.h, and gathers it); or one layer (or the output head,
// first_layer == n_layer) split over a group: `dense_nodes` shard the dense tensors and the KV
// (tensor parallel), `expert_nodes` hold the routed experts (expert parallel).
struct StageSpec {
  int32_t first_layer = 0, last_layer = 0;
  int64_t dense_nodes = 1;
  int64_t expert_nodes = 0;
  bool tp_fast = false;      // a split range: all-reduces of partial sums (`--tp-mode fast`)
  double collective_s = 0;   // a split range: CapacityOptions::collective_s
  bool embed_only = false;   // nodes that only hold the token embedding (lookups cost ~0)
  bool layer_group = false;  // one layer priced as a group (layer-split mode; head apart)
  int64_t nodes() const { return dense_nodes + expert_nodes; }
  bool split() const { return dense_nodes > 1 || expert_nodes > 0; }
};

// Time of one micro-batch in a stage: `busy_s` occupies the stage's busiest resource (the next
// micro-batch can start after it), `latency_s` is the micro-batch's time through the stage
// including the hop to the next one. `bound` names what dominates busy_s.
struct StepCost {
  double busy_s = 0;
  double latency_s = 0;
  const char* bound = "memory bandwidth";
  // A split range: its members, each busy all of busy_s on shared cores: a collective's wait
  // (~40 us a call here, tools/calibrate) is spent polling, which the receive does for 200 us
  // before it blocks (collective/group.h). Charged as idle instead, the wait priced 2 stages of 2
  // members on 2 cores at 4 streams +25% over measured.
  int64_t members = 1;
  double core_s() const { return static_cast<double>(members) * busy_s; }
};
StepCost StageDecodeCost(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                         const StageSpec& s, double batch);
StepCost StagePrefillCost(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                          const StageSpec& s, double tokens);
// A step of `rows` rows mixing prompt chunks and decodes (continuous batching), `sampled` of
// them producing logits, each row attending to `ctx` positions on average: one forward pass,
// so weights are read once and each row adds its compute as a prompt token does.
// StagePrefillCost is one fresh chunk (sampled 1, ctx tokens / 2).
StepCost StageMixedCost(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                        const StageSpec& s, double rows, double sampled, double ctx);

struct WeightsBreakdown {
  uint64_t total = 0, embeddings = 0, head = 0, layers = 0, experts = 0, other = 0;
  uint64_t layer_min = 0, layer_max = 0;  // bytes of the smallest / largest layer
  double params = 0, active_params = 0;   // matrix parameters, all and per token
};

struct CapacityReport {
  std::string model, device;
  CapacityOptions opt;
  PlanConfig config;  // what the stages were priced with (per replica)
  WeightsBreakdown w;
  int32_t n_gqa = 0, n_mla = 0, n_kda = 0;  // layers by attention kind
  uint64_t kv_bytes_per_token = 0;          // all layers
  uint64_t state_bytes_per_seq = 0;         // all layers (KDA)
  uint64_t kv_total = 0;                    // context x concurrency + states
  uint64_t wire_bytes_per_token = 0;        // one activation row per hop
  int32_t n_layer = 0;
  uint64_t node_limit = 0;       // a node's memory limit
  uint64_t node_usable = 0;      // a node's memory minus process overhead and buffers
  int64_t nodes_weights = 0;     // ceil(weights / (memory - overhead))
  int64_t nodes_weights_kv = 0;  // ceil((weights + KV) / usable)
  // Placement of one replica.
  std::string mode;  // "single node", "pipeline", "layer split"
  std::vector<StageSpec> stages;
  std::optional<Plan> pipeline;  // MakePlan's table in pipeline mode
  int64_t nodes_per_replica = 0, replicas = 0, nodes_used = 0;
  int64_t max_nodes_per_layer = 1, experts_per_node = 0;
  // Speed.
  double prefill_tps = 0, ttft_s = 0;
  double decode_tps_stream = 0, decode_tps_aggregate = 0;
  double decode_tps_single = 0;   // one sequence alone on a replica
  double decode_tps_overlap = 0;  // aggregate if consecutive steps overlapped (ideal pipeline)
  // Requests of prompt + output at `concurrency` (opt.output > 0): output tokens/s of all
  // replicas with prefill and per-step overhead included, and the seconds one request takes.
  double served_tps = 0, request_s = 0;
  double ttft_batch_s = 0;     // mean TTFT when the replica's requests arrive together
  double prefill_batch_s = 0;  // until the last of those requests has its first token
  double bubble = 0;           // idle fraction of the busiest stage in a decode step
  int32_t groups = 1;          // sequence groups with a step in flight each (opt.pipeline_groups)
  int32_t micro_batches = 0;   // in flight per replica: groups x micro-batches per group step
  double micro_batch = 0;      // sequences per micro-batch
  std::string binding;
  double power_w = 0, cost_usd = 0, joules_per_token = 0;
};

Result<CapacityReport> PlanCapacity(const ModelProfile& p, const DevicePreset& d,
                                    const CapacityOptions& o);
std::string FormatCapacity(const CapacityReport& r);
std::string CapacityToJson(const CapacityReport& r);

// The write-up's PS3 arithmetic and what it leaves out (`shoal plan --seed-check`).
struct SeedCheck {
  double pflops = 0;         // 100k x 200 GFLOPS
  double memory_tib = 0;     // 100k x 256 MiB
  double bandwidth_pbs = 0;  // 100k x 25.6 GB/s
  double gib_7b_fp16 = 0, gib_70b_q4 = 0;
  int64_t nodes_7b = 0, nodes_70b = 0;  // ceil(bytes / 256 MiB)
};
SeedCheck ComputeSeedCheck();
std::string FormatSeedCheck(const SeedCheck& s);

}  // namespace shoal::planner
