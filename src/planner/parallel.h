// Layouts with tensor-parallel groups: `--parallel tp=T,pp=P[,ep=E]` forces one; the pipeline
// stages are then groups of T consecutive nodes, each member holding a slice of every layer of its
// stage (model/tensor_parallel.h: heads, FFN columns, experts, the head's vocabulary).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "measure/node_info.h"
#include "model/hparams.h"
#include "planner/plan.h"

namespace shoal::planner {

struct Parallel {
  int tp = 1;  // members per stage
  int pp = 0;  // stages; 0: as many groups of tp as the nodes make
  // Experts split over the members of each group (expert parallel): 0 (= tp) or tp; the MoE
  // layers of a split stage always place whole experts on members.
  int ep = 0;
  // `--tp-mode fast`: split stages add partial sums (TpShard::fast) instead of gathering whole
  // dot products.
  bool fast = false;
};

// "tp=2,pp=2", "tp=4", "pp=3", "tp=2,pp=1,ep=2"; an empty string is the default {1, 0}.
Result<Parallel> ParseParallel(const std::string& s);
std::string FormatParallel(const Parallel& p);

// Forms the groups (nodes in their order, tp consecutive nodes a stage) and plans the layers over
// them as a pipeline, each group priced as one node with its members' memory and speed summed.
// The default layout {1, 0} is a pipeline of every node when the layers fit the nodes, else the
// smallest tp whose groups hold the model (the planner's choice when a layer outgrows a node).
// With fewer nodes than tp * pp (after a failure) it keeps tp when it can and uses fewer stages,
// then shrinks tp to the nodes left; nodes past the groups stay unused. Every stage's `members`
// lists its nodes (member 0 = `node`).
Result<Plan> MakeParallelPlan(const ModelProfile& profile,
                              const std::vector<measure::NodeInfo>& nodes, const PlanConfig& config,
                              const Parallel& par);

// Member k's slices of a stage split over t members, for --dry-run and /v1/cluster:
// "heads [0, 16) ffn [0, 2816) embd [0, 1024) experts [0, 4) vocab [0, 16000)".
std::string MemberSlices(const HParams& hp, int t, int k);
// The plan's groups: one line per member with its node and slices (empty without tp groups);
// FormatPlan ends with it.
std::string FormatGroups(const Plan& plan);

// What member k of a t-way split holds of a stage (from first_layer) of `whole` memory: its KV
// heads' share of the KV, 1/t of the weights but for the token embedding (every member of a
// first stage embeds its tokens from the whole table), buffers and overhead whole, plus the
// buffers of its collectives (CollectiveBufferBytes).
StageMemory MemberMemory(const ModelProfile& p, const PlanConfig& c, const StageMemory& whole,
                         int32_t first_layer, int t, int k);
// The largest all-gather of a split step, in floats: max_batched_tokens rows of the widest
// gathered tensor (attention output, FFN activations, embedding, experts' outputs: top-k rows of
// n_embd each), or the logits of max_num_seqs rows.
int64_t LargestGatherFloats(const ModelProfile& p, const PlanConfig& c);
// The collectives one row makes through layer l of a stage split over members, each as the
// floats it carries per row (model/tensor_parallel.h). Exact: all-gathers of the attention
// output, the output projection, the FFN activations and the down projection (shared experts
// alike), of the routed experts' outputs (top-k rows) and, for kimi-k3's latent experts, of the
// latent. Fast (llama family): the output and down projections' all-reduces replace their two
// gathers each.
struct TpCollectives {
  std::vector<double> gathers;  // each member sends its 1/T share to every other
  std::vector<double> reduces;  // each member sends its whole partial sum to every other
  int calls() const { return static_cast<int>(gathers.size() + reduces.size()); }
};
TpCollectives LayerCollectives(const HParams& hp, int32_t l, bool fast);

// Bytes a member's collectives hold at their peak: the gathered result, its own part, the
// reordered copy (model/tensor_parallel.h ColumnGather) and the frames on the way in and out
// (net::Conn: payload, sealed copy, receive buffer): 5 copies of the largest gather.
uint64_t CollectiveBufferBytes(const ModelProfile& p, const PlanConfig& c);

}  // namespace shoal::planner
