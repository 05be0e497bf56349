// The engine's sizing rules, and the local engine built with them.
#include "engine/engine_builder.h"

#include <algorithm>

namespace shoal {

EngineConfig ApplyStateRules(EngineConfig cfg, bool recurrent) {
  if (!recurrent) {
    cfg.state_slots = 0;
    cfg.state_snapshots = 0;
    return cfg;
  }
  cfg.state_slots = std::max(1, cfg.max_num_seqs);
  cfg.state_snapshots = StateSnapshotSlots(cfg.state_slots);
  cfg.swap_blocks = 0;
  cfg.pipeline_groups = 1;
  return cfg;
}

int32_t StageStateSlots(const EngineConfig& cfg) { return cfg.state_slots + cfg.state_snapshots; }

Result<std::unique_ptr<Engine>> Engine::Create(Model* model, const EngineConfig& cfg_in,
                                               std::vector<int32_t> eog_ids) {
  EngineConfig cfg = cfg_in;
  if (!model->is_first_stage() || !model->is_last_stage())
    return Errorf("a local engine needs the whole model, got layers [{}, {})", model->first_layer(),
                  model->last_layer());
  if (cfg.n_threads <= 0) cfg.n_threads = HardwareThreads();
  if (cfg.block_size <= 0) return Errorf("block size must be positive");
  if (cfg.n_ctx <= 0) return Errorf("context length must be positive");
  if (cfg.swap_blocks < 0) return Errorf("swap blocks must be >= 0");
  cfg = ApplyStateRules(cfg, model->StateFloatsPerSeq() > 0);
  const int64_t per_seq = BlockTable::BlocksFor(cfg.n_ctx, cfg.block_size);
  const uint64_t block_bytes =
      std::max<uint64_t>(1, model->MakeKvLayout(1, cfg.block_size, cfg.kv_dtype).BytesPerBlock());
  int64_t blocks = cfg.kv_blocks;
  if (cfg.kv_mem_bytes > 0) {
    blocks = static_cast<int64_t>(cfg.kv_mem_bytes / block_bytes);
  } else if (blocks <= 0) {
    // Room for every sequence at full context, capped at 1 GiB of KV by default.
    const int64_t cap = (int64_t{1} << 30) / static_cast<int64_t>(block_bytes);
    blocks = std::max<int64_t>(per_seq, std::min(per_seq * cfg.max_num_seqs, cap));
  }
  if (blocks < per_seq)
    return Errorf(
        "the KV pool of {} blocks ({} bytes each) holds {} tokens, less than one sequence of the "
        "context length {}: raise the KV memory or lower the context",
        blocks, block_bytes, blocks * cfg.block_size, cfg.n_ctx);
  if (blocks > INT32_MAX) return Errorf("KV pool of {} blocks is too large", blocks);
  const auto n_blocks = static_cast<int32_t>(blocks);
  SHOAL_ASSIGN_OR_RETURN(
      std::unique_ptr<Stage> stage,
      Stage::Create(model,
                    {n_blocks, cfg.block_size, cfg.kv_dtype, StageStateSlots(cfg), cfg.swap_blocks},
                    cfg.n_threads));
  auto exec = std::make_unique<LocalExecutor>(std::move(stage));
  return std::make_unique<Engine>(std::move(exec), cfg, n_blocks, std::move(eog_ids));
}

}  // namespace shoal
