// What the engine hands an executor each step (StepInput), what comes back (StepOutput), and the
// executor that runs the whole model in this process (LocalExecutor, one Stage).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "base/status.h"
#include "engine/stage.h"
#include "model/batch.h"
#include "sched/scheduler.h"

namespace shoal {

// One step: the KV copies to apply, then the batch to run. Block and slot ids are the
// executor's (global) ids. The lists apply in this order: pool -> swap, pool -> pool,
// swap -> pool, then recurrent-state slot -> slot. A pipeline sends the same value down every
// stage (cluster/wire.h's StepWork adds the hidden rows and the tables' storage).
struct StepInput {
  std::vector<BlockCopy> swap_out, copies, swap_in;
  std::vector<BlockCopy> state_copies;  // forks of a recurrent state (kimi-k3)
  Batch batch;                          // never empty when submitted

  bool has_copies() const {
    return !swap_out.empty() || !copies.empty() || !swap_in.empty() || !state_copies.empty();
  }
  void Clear();
  // Appends `other`'s copies after this one's (a step whose plan had copies but no chunks
  // hands them to the next: such a plan only swaps out, so nothing it copies is read before).
  void AppendCopies(const StepInput& other);
};

// The executor lost every KV row and swap slot (a pipeline node failed and it re-planned over
// the survivors): the collected step and every other step submitted before it are void, and
// the executor has forgotten them. The engine recomputes every sequence's KV from its tokens.
struct KvLost {
  uint64_t epoch = 0;  // KV epoch now: how many losses the executor has had
  std::string why;     // the failure that caused it
};

struct StepOutput {
  std::vector<float> logits;      // [batch.out_rows.size()][n_vocab]
  std::optional<KvLost> kv_lost;  // set instead of logits when the KV was lost
};

// Runs steps through the model's layers: in this process (LocalExecutor) or through the
// stages of a pipeline (cluster::RemoteExecutor, cluster::FailoverExecutor). Steps may overlap:
// Submit starts one (the executor keeps what it needs of `in`), Collect returns the oldest one
// not yet collected (first in, first out).
class Executor {
 public:
  virtual ~Executor() = default;
  virtual int64_t n_vocab() const = 0;
  // An error is a failure of the step that no re-plan can fix (the engine fails its requests).
  virtual Status Submit(const StepInput& in) = 0;
  virtual Status Collect(StepOutput* out) = 0;
  // Submit, then Collect.
  Status Run(const StepInput& in, StepOutput* out);
};

// The whole model in this process: one Stage over layers [0, n_layer). Submit computes the
// step at once; Collect hands the results back in order.
class LocalExecutor final : public Executor {
 public:
  explicit LocalExecutor(std::unique_ptr<Stage> stage) : stage_(std::move(stage)) {}
  int64_t n_vocab() const override { return stage_->model().hparams().n_vocab; }
  Status Submit(const StepInput& in) override;
  Status Collect(StepOutput* out) override;

 private:
  std::unique_ptr<Stage> stage_;
  ForwardOutput fwd_;
  std::deque<std::vector<float>> done_;    // computed logits, oldest first
  std::vector<std::vector<float>> spare_;  // collected buffers, reused (no allocation per step)
};

}  // namespace shoal
