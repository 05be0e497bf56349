// Stage warm-up at assignment: makes a node's memory reach its planned size before it serves.
#pragma once

#include "base/status.h"
#include "engine/stage.h"
#include "model/tensor_parallel.h"
#include "planner/cost_model.h"

namespace shoal::cluster {

// Touches the KV pool (and swap space), then runs one forward pass of the largest step the
// config allows: max_batched_tokens rows in min(max_num_seqs, max_batched_tokens) sequences,
// every one sampling, over blocks 0, 1, ... (their contents are overwritten before any real
// sequence reads them). The pass's output is encoded as the real step would send it. After this
// every buffer has its steady-state size, so the node's RSS is what it will stay at; the
// weights are resident already (the tensor hashes read them).
Status WarmUpStage(Stage& stage, const planner::PlanConfig& c);

// The all-gather a tensor-parallel member warms up with before its group is linked: every
// buffer gets its real size, the other members' parts read as zeros.
class WarmUpComm final : public TpComm {
 public:
  explicit WarmUpComm(int rank) : rank_(rank) {}
  Status AllGather(std::span<const float> mine, std::span<const int64_t> counts,
                   std::vector<float>* out) override;

 private:
  int rank_;
};

}  // namespace shoal::cluster
