// The rules that size an engine for a model, in one place: the local engine (Engine::Create),
// the pipeline's coordinator (cluster/cluster_engine.h) and every node's stage use them.
#pragma once

#include <cstdint>

#include "engine/engine.h"

namespace shoal {

// A model with a per-sequence recurrent state (kimi-k3's KDA layers) keeps it in slots beside
// the KV pool: one per running sequence, then as many for prefix-cache snapshots of the state
// (sched/scheduler.h). Its sequences are preempted by recompute, which rebuilds the state (no
// swap), and one sequence group owns every slot id (one pipeline group). Other models: no
// slots, cfg unchanged.
EngineConfig ApplyStateRules(EngineConfig cfg, bool recurrent);

// The state slots a stage allots for a config: the sequences' and the snapshots' (0 without a
// recurrent state). A pipeline node, which does not know whether its layers are recurrent
// before it loads them, asks with recurrent = true: a stage without recurrent layers stores no
// state whatever the count.
int32_t StageStateSlots(const EngineConfig& cfg);
inline int32_t StageStateSlots(int32_t max_num_seqs) {
  EngineConfig c;
  c.max_num_seqs = max_num_seqs;
  return StageStateSlots(ApplyStateRules(c, true));
}

}  // namespace shoal
