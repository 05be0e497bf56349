// One stage of the model: a layer range with its KV pool, swap space and thread pool. The
// single-process executor, a pipeline node and a node's warm-up all run steps through it, so a
// node runs exactly the code a single process runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "base/status.h"
#include "kvcache/kv_store.h"
#include "model/model.h"
#include "threading/thread_pool.h"

namespace shoal {

struct StepInput;

// The sizes of a stage's KV store (the same on every stage of a pipeline).
struct StageSizes {
  int32_t n_blocks = 0;     // KV pool, in blocks
  int32_t block_size = 16;  // tokens per block
  DType kv_dtype = DType::kF16;
  int32_t state_slots = 0;  // recurrent-state slots (sequences' and snapshots'); 0: none
  int32_t swap_blocks = 0;  // swap space, in blocks; 0: none
};

class Stage {
 public:
  // Allocates the KV pool (and swap space) for `model`'s layers; `model` outlives the stage.
  static Result<std::unique_ptr<Stage>> Create(Model* model, const StageSizes& sizes,
                                               int n_threads);

  const Model& model() const { return *model_; }
  KvStore& kv() { return kv_; }
  KvStore* swap() { return swap_ ? &*swap_ : nullptr; }
  ThreadPool* pool() { return &pool_; }

  // Checks every block id, copy and state slot of `in` against this stage's pool (a step from
  // a socket is untrusted), then applies the copies in StepInput's order.
  Status Apply(const StepInput& in);
  // Runs the batch through this stage's layers (Model::Forward): hidden_in is null on the
  // first stage, [HiddenPlanes(first_layer)][n_rows][n_embd] on the others.
  Status Forward(const Batch& batch, const float* hidden_in, ForwardOutput* out);
  // Apply, then Forward.
  Status Run(const StepInput& in, const float* hidden_in, ForwardOutput* out);

 private:
  Stage(Model* model, KvStore kv, std::optional<KvStore> swap, int n_threads)
      : model_(model), kv_(std::move(kv)), swap_(std::move(swap)), pool_(n_threads) {}
  Model* model_;
  KvStore kv_;
  std::optional<KvStore> swap_;
  ThreadPool pool_;
};

}  // namespace shoal
