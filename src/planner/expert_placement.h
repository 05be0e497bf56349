// Where a MoE layer's experts live in an expert-parallel group, and how evenly that spreads the
// work: from measured routing counts (Model::ExpertLoad), the busiest member's load against the
// mean, for the contiguous ranges the runtime places today and for a placement with redundant
// copies of the hottest experts (as DeepSeek's EPLB does).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace shoal::planner {

struct ExpertPlacement {
  // [member]: the experts it holds (an expert with copies appears on several members, each
  // copy taking an equal share of its load).
  std::vector<std::vector<int32_t>> experts;
  std::vector<double> load;  // [member] routed rows it runs
  // The busiest member's load over the mean (1 = even): a step waits for the busiest member.
  double busiest_over_mean = 0;
};

// Member k holds experts SliceOf(n_expert, members, k), as model/tensor_parallel.h does.
Result<ExpertPlacement> PlaceContiguous(const std::vector<int64_t>& load, int members);

// `redundant` extra copies: each goes to the expert whose copies now carry the most load each;
// then copies are placed heaviest first on the least loaded member that has a free slot and no
// copy of that expert (every member holds (n_expert + redundant) / members slots, rounded up).
Result<ExpertPlacement> PlaceBalanced(const std::vector<int64_t>& load, int members, int redundant);

}  // namespace shoal::planner
