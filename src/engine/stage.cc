// Stage: check and apply a step's KV copies, then run the layers.
#include "engine/stage.h"

#include "engine/executor.h"

namespace shoal {

Result<std::unique_ptr<Stage>> Stage::Create(Model* model, const StageSizes& s, int n_threads) {
  SHOAL_ASSIGN_OR_RETURN(KvStore kv, KvStore::Create(model->MakeKvLayout(
                                         s.n_blocks, s.block_size, s.kv_dtype, s.state_slots)));
  std::optional<KvStore> swap;
  if (s.swap_blocks > 0) {
    SHOAL_ASSIGN_OR_RETURN(
        swap, KvStore::Create(model->MakeKvLayout(s.swap_blocks, s.block_size, s.kv_dtype)));
  }
  return std::unique_ptr<Stage>(new Stage(model, std::move(kv), std::move(swap), n_threads));
}

namespace {

Status CheckCopies(const std::vector<BlockCopy>& list, const char* what, int32_t n_src,
                   int32_t n_dst) {
  for (const BlockCopy& c : list)
    if (c.src < 0 || c.src >= n_src || c.dst < 0 || c.dst >= n_dst)
      return Errorf("{} {} -> {} outside [0, {}) -> [0, {})", what, c.src, c.dst, n_src, n_dst);
  return Status::Ok();
}

}  // namespace

Status Stage::Apply(const StepInput& in) {
  const KvLayout& lay = kv_.layout();
  for (const SeqChunk& c : in.batch.chunks)
    for (int32_t b : c.blocks)
      if (b < 0 || b >= lay.n_blocks)
        return Errorf("sequence {}: block {} outside the pool of {}", c.seq_id, b, lay.n_blocks);
  if (!in.has_copies()) return Status::Ok();
  const int32_t n_swap = swap_ ? swap_->layout().n_blocks : 0;
  if ((!in.swap_out.empty() || !in.swap_in.empty()) && !swap_)
    return Errorf("swap requested but the stage has no swap space");
  SHOAL_RETURN_IF_ERROR(CheckCopies(in.swap_out, "swap-out", lay.n_blocks, n_swap));
  SHOAL_RETURN_IF_ERROR(CheckCopies(in.copies, "block copy", lay.n_blocks, lay.n_blocks));
  SHOAL_RETURN_IF_ERROR(CheckCopies(in.swap_in, "swap-in", n_swap, lay.n_blocks));
  // State copies reach every stage of a pipeline; one without recurrent layers keeps no state.
  const bool states = lay.state_floats > 0;
  if (states)
    SHOAL_RETURN_IF_ERROR(
        CheckCopies(in.state_copies, "state copy", lay.n_state_slots, lay.n_state_slots));
  for (const BlockCopy& c : in.swap_out) CopyKvBlock(kv_, c.src, *swap_, c.dst);
  for (const BlockCopy& c : in.copies) CopyKvBlock(kv_, c.src, kv_, c.dst);
  for (const BlockCopy& c : in.swap_in) CopyKvBlock(*swap_, c.src, kv_, c.dst);
  if (states)
    for (const BlockCopy& c : in.state_copies) kv_.CopyState(c.src, c.dst);
  return Status::Ok();
}

Status Stage::Forward(const Batch& batch, const float* hidden_in, ForwardOutput* out) {
  return model_->Forward(batch, hidden_in, kv_, &pool_, out);
}

Status Stage::Run(const StepInput& in, const float* hidden_in, ForwardOutput* out) {
  SHOAL_RETURN_IF_ERROR(Apply(in));
  return Forward(in.batch, hidden_in, out);
}

}  // namespace shoal
