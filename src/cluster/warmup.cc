// WarmUpStage: one full-size forward pass of a pipeline stage at assignment.
#include "cluster/warmup.h"

#include <algorithm>
#include <vector>

#include "cluster/wire.h"

namespace shoal::cluster {

Status WarmUpStage(Stage& stage, const planner::PlanConfig& c) {
  stage.kv().Touch();
  if (stage.swap()) stage.swap()->Touch();
  const KvLayout& lay = stage.kv().layout();
  const Model& model = stage.model();
  const int32_t T = std::max(c.max_batched_tokens, 1);
  const int32_t R = std::max(1, std::min(c.max_num_seqs, T));
  // Block tables: chunk i takes the next ceil(rows / block_size) blocks; a pool too small for
  // the whole batch (never with the planner's sizes) warms up on what fits.
  std::vector<std::vector<int32_t>> tables;
  std::vector<int32_t> rows;
  int32_t next_block = 0;
  for (int32_t i = 0; i < R; ++i) {
    const int32_t n = T / R + (i < T % R ? 1 : 0);
    const int32_t nb = (n + lay.block_size - 1) / lay.block_size;
    if (n == 0 || next_block + nb > lay.n_blocks) break;
    tables.emplace_back();
    for (int32_t b = 0; b < nb; ++b) tables.back().push_back(next_block++);
    rows.push_back(n);
  }
  if (rows.empty()) return Status::Ok();
  StepWork w;  // as the real step: checked and applied by the stage, encoded as it would be sent
  Batch& batch = w.batch;
  std::vector<int32_t> ids;
  for (size_t i = 0; i < rows.size(); ++i) {
    ids.assign(static_cast<size_t>(rows[i]), 0);
    const int32_t slot = static_cast<int32_t>(i) < lay.n_state_slots ? static_cast<int32_t>(i) : -1;
    batch.Add(static_cast<int64_t>(i), ids, 0, tables[i], true, false, 0, slot);
  }
  const HParams& hp = model.hparams();
  std::vector<float> hidden;  // as a received activations frame would decode
  if (!model.is_first_stage())
    hidden.assign(static_cast<size_t>(model.HiddenPlanes(model.first_layer())) *
                      static_cast<size_t>(batch.n_rows() * hp.n_embd),
                  0.f);
  ForwardOutput out;
  SHOAL_RETURN_IF_ERROR(stage.Run(w, hidden.empty() ? nullptr : hidden.data(), &out));
  std::vector<uint8_t> payload;
  if (model.is_last_stage()) {
    payload = EncodeLogits(out.logits);
  } else {
    w.batch.tokens.clear();
    w.hidden = std::move(out.hidden);
    SHOAL_RETURN_IF_ERROR(EncodeStepWork(w, c.link_dtype, hp.n_embd, &payload));
  }
  return Status::Ok();
}

Status WarmUpComm::AllGather(std::span<const float> mine, std::span<const int64_t> counts,
                             std::vector<float>* out) {
  int64_t total = 0, at = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    if (static_cast<int>(k) < rank_) at += counts[k];
    total += counts[k];
  }
  out->assign(static_cast<size_t>(total), 0.f);
  std::copy(mine.begin(), mine.end(), out->begin() + at);
  return Status::Ok();
}

}  // namespace shoal::cluster
