// A tensor-parallel model's all-gather (model/tensor_parallel.h) over a Group's links.
#pragma once

#include "collective/group.h"
#include "model/tensor_parallel.h"

namespace shoal::collective {

class GroupTpComm final : public TpComm {
 public:
  explicit GroupTpComm(Group* group) : group_(group) {}
  Status AllGather(std::span<const float> mine, std::span<const int64_t> counts,
                   std::vector<float>* out) override {
    return group_->AllGather(mine, counts, out);
  }

 private:
  Group* group_;
};

}  // namespace shoal::collective
