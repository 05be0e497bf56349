// StepInput helpers and the single-process executor.
#include "engine/executor.h"

namespace shoal {

void StepInput::Clear() {
  swap_out.clear();
  copies.clear();
  swap_in.clear();
  state_copies.clear();
  batch.Clear();
}

void StepInput::AppendCopies(const StepInput& o) {
  swap_out.insert(swap_out.end(), o.swap_out.begin(), o.swap_out.end());
  copies.insert(copies.end(), o.copies.begin(), o.copies.end());
  swap_in.insert(swap_in.end(), o.swap_in.begin(), o.swap_in.end());
  state_copies.insert(state_copies.end(), o.state_copies.begin(), o.state_copies.end());
}

Status Executor::Run(const StepInput& in, StepOutput* out) {
  SHOAL_RETURN_IF_ERROR(Submit(in));
  return Collect(out);
}

Status LocalExecutor::Submit(const StepInput& in) {
  SHOAL_RETURN_IF_ERROR(stage_->Run(in, nullptr, &fwd_));
  done_.emplace_back();
  done_.back().swap(fwd_.logits);
  if (!spare_.empty()) {  // the next step's logits land in a buffer that has room already
    fwd_.logits.swap(spare_.back());
    spare_.pop_back();
  }
  return Status::Ok();
}

Status LocalExecutor::Collect(StepOutput* out) {
  if (done_.empty()) return Errorf("collect without a submitted step");
  out->kv_lost.reset();
  out->logits.swap(done_.front());
  spare_.push_back(std::move(done_.front()));
  done_.pop_front();
  return Status::Ok();
}

}  // namespace shoal
