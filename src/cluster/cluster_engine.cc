// BuildClusterEngine: state rules, first plan, micro-batches, engine.
#include "cluster/cluster_engine.h"

#include <algorithm>

#include "engine/engine_builder.h"
#include "planner/cost_model.h"

namespace shoal::cluster {

void SetPlanSizes(const EngineConfig& cfg, planner::PlanConfig* plan) {
  plan->max_num_seqs = cfg.max_num_seqs;
  plan->max_model_len = cfg.n_ctx;
  plan->block_size = cfg.block_size;
  plan->kv_dtype = cfg.kv_dtype;
  plan->max_batched_tokens = cfg.max_num_batched_tokens;
}

Result<ClusterEngine> BuildClusterEngine(const gguf::File& file, const HParams& hp,
                                         EngineConfig cfg, FailoverOptions fo, net::ClusterKey key,
                                         int32_t pipeline_groups, std::vector<int32_t> eog) {
  bool recurrent = false;
  for (int64_t il = 0; il < hp.n_layer; ++il) recurrent = recurrent || hp.is_recurrent_layer(il);
  // A recurrent state lives on the stages owning its layers, in slots the scheduler allots.
  cfg = ApplyStateRules(cfg, recurrent);
  SetPlanSizes(cfg, &fo.cluster.plan);
  fo.cluster.swap_blocks = cfg.swap_blocks;
  SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<FailoverExecutor> exec,
                         FailoverExecutor::Create(fo, file, std::move(key), hp.n_vocab, hp.n_embd));
  ClusterEngine out;
  out.plan = exec->stats().plan;
  const int32_t blocks =
      static_cast<int32_t>(planner::KvTokensPerLayer(fo.cluster.plan) / fo.cluster.plan.block_size);
  const int32_t n_stages = static_cast<int32_t>(out.plan.stages.size());
  if (!recurrent) cfg.pipeline_groups = pipeline_groups > 0 ? pipeline_groups : n_stages;
  // Overlapped groups fill the pipeline themselves: one micro-batch per group step.
  const int32_t groups = cfg.pipeline_groups;
  exec->SetMicroBatches(
      [groups](int32_t stages) { return groups > 1 ? std::max(1, stages / groups) : stages; });
  out.control = exec.get();
  out.engine = std::make_unique<Engine>(std::move(exec), cfg, blocks, std::move(eog));
  return out;
}

}  // namespace shoal::cluster
