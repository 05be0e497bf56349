// Pipeline placement: contiguous layer ranges over nodes, balanced by speed within each node's
// memory limit (`shoal serve --dry-run` prints FormatPlan).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "measure/node_info.h"
#include "planner/cost_model.h"
#include "planner/model_profile.h"

namespace shoal::planner {

struct Stage {
  int32_t node = 0;  // index into the nodes given to MakePlan (member 0 of a split stage)
  // A stage split inside its layers (planner/parallel.h): its nodes in member order; empty or
  // one entry for a stage on one node.
  std::vector<int32_t> members;
  std::vector<std::string> member_names;   // [member] node names
  std::vector<std::string> member_slices;  // [member] planner::MemberSlices
  std::vector<StageMemory> member_mem;     // [member] planner::MemberMemory
  bool tp_fast = false;                    // split in fast mode (planner::Parallel::fast)

  std::string node_name;
  int32_t first_layer = 0;  // [first_layer, last_layer)
  int32_t last_layer = 0;
  StageMemory mem;
  uint64_t mem_limit = 0;
  StageTime time;  // per token
  LinkTime link;   // to the next stage (zero on the last stage)
};

struct Plan {
  std::string model;  // general.name or arch
  int32_t n_layer = 0;
  PlanConfig config;
  std::vector<Stage> stages;
  uint64_t kv_tokens_per_layer = 0;
  // One sequence decoding alone: every stage in turn plus every hop, and (with more than one
  // stage) the sampled token's latency back to the first stage.
  double decode_s_per_token = 0;
  double decode_tokens_per_s = 0;
  // Decode with the pipeline full (>= one sequence in flight per stage): the slowest stage or
  // link transfer bounds the rate.
  double throughput_tokens_per_s = 0;
  int32_t bottleneck_stage = 0;
  // Why the default layout split the layers over groups (planner::MakeParallelPlan), if it did.
  std::string choice;
};

// Places the model's layers over `nodes`, in their order, one stage per node; every node serves
// at least one layer (a stage with none would only add a hop and its process overhead), so there
// must be no more nodes than layers: the caller chooses which nodes join. Among assignments that
// fit every node's memory, picks the one with the smallest slowest stage (by config.balance),
// then the smallest sum of squared stage times (stages as even as the layers allow). Errors:
// invalid input, or no assignment fits, with the shortfall per node and in total.
Result<Plan> MakePlan(const ModelProfile& profile, const std::vector<measure::NodeInfo>& nodes,
                      const PlanConfig& config);

// Fills memory, times and pipeline rates for given layer ranges (last_layer of stage i must be
// first_layer of stage i + 1); MakePlan uses it, and the simulator can price any split.
Result<Plan> EvaluatePlan(const ModelProfile& profile, const std::vector<measure::NodeInfo>& nodes,
                          const PlanConfig& config, const std::vector<int32_t>& layer_counts);

// A readable table: one row per stage, then the pipeline's totals.
std::string FormatPlan(const Plan& plan);

// "301.2 MiB".
std::string FormatMiB(uint64_t bytes);

}  // namespace shoal::planner
