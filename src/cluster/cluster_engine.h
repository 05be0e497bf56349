// The coordinator's engine over a pipeline of `shoal node` workers, built in one place.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cluster/cluster_control.h"
#include "cluster/failover_executor.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "net/auth.h"

namespace shoal::cluster {

struct ClusterEngine {
  std::unique_ptr<Engine> engine;
  ClusterControl* control = nullptr;  // the engine's executor: lives as long as `engine`
  planner::Plan plan;                 // the first plan
};

// Plans the layers of `file` (whose hyper-parameters are `hp`) over fo.cluster.nodes (with
// fo.standby as spares), assigns them and builds the engine that streams its steps through them,
// failing over on node loss. The engine config is sized by the engine builder's rules
// (engine/engine_builder.h) for the model's recurrent layers, fo.cluster.plan takes its sizes from
// it, and pipeline_groups sequence groups overlap their steps (0: one per stage; 1 with a recurrent
// state).
Result<ClusterEngine> BuildClusterEngine(const gguf::File& file, const HParams& hp,
                                         EngineConfig cfg, FailoverOptions fo, net::ClusterKey key,
                                         int32_t pipeline_groups, std::vector<int32_t> eog);

// The plan sizes a pipeline serving `cfg` needs (link_dtype is the caller's).
void SetPlanSizes(const EngineConfig& cfg, planner::PlanConfig* plan);

}  // namespace shoal::cluster
