// A loaded model (or a layer range of one) and its forward pass over a Batch.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "arch/arch.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "kvcache/kv_store.h"
#include "model/batch.h"
#include "model/weights.h"
#include "threading/thread_pool.h"

namespace shoal {

struct LoadOptions {
  int32_t first_layer = 0;
  int32_t last_layer = -1;  // exclusive; -1 = n_layer
  // Lay out the matrices the tiled kernels can read in place once at load (PretileMatrices);
  // false keeps every weight in the file's mapping (then each batched matmul repacks panels).
  bool pretile = true;
};

struct ForwardOutput {
  std::vector<float> logits;  // [out_rows.size(), n_vocab] when the range ends at the last layer
  // When it does not: [HiddenPlanes(last_layer)][n_rows][n_embd], plane 0 the hidden state.
  std::vector<float> hidden;
};

class Model {
 public:
  virtual ~Model() = default;

  // Loads the tensors of layers [first_layer, last_layer) plus the embeddings (if the range
  // starts at 0) and the output head (if it ends at n_layer). Weights stay in the mmap, but for
  // the matrices laid out for the tiled kernels (LoadOptions::pretile).
  static Result<std::unique_ptr<Model>> Load(const gguf::File& file, const LoadOptions& opt);

  const HParams& hparams() const { return hp_; }
  int32_t first_layer() const { return first_; }
  int32_t last_layer() const { return last_; }
  bool is_first_stage() const { return first_ == 0; }
  bool is_last_stage() const { return last_ == hp_.n_layer; }

  // KV layout for this model's layers with the given pool size (and, for models with a
  // recurrent state, n_state_slots sequences' states).
  KvLayout MakeKvLayout(int32_t n_blocks, int32_t block_size, DType dtype,
                        int32_t n_state_slots = 0) const;
  // F32 values of one sequence's recurrent state over this model's layers (0: none; then
  // chunks need no state slot).
  virtual int64_t StateFloatsPerSeq() const { return 0; }

  // [n_rows, n_embd] planes that travel into layer `layer` (0 < layer < n_layer) from the stage
  // before it: the hidden state, then whatever else the architecture carries across layers
  // (kimi-k3: the banked attention-residual inputs, one plane per block started so far).
  int32_t HiddenPlanes(int32_t layer) const { return hp_.hidden_planes(layer); }

  // Runs layers [first, last) over the batch. The first stage embeds batch.tokens; later
  // stages read hidden_in [HiddenPlanes(first)][n_rows][n_embd]. Before the call, every
  // chunk's block table must cover positions [0, pos0 + n_tokens). Writes out->logits or
  // out->hidden.
  virtual Status Forward(const Batch& batch, const float* hidden_in, KvStore& kv, ThreadPool* pool,
                         ForwardOutput* out) = 0;

 protected:
  // Takes hp and the layer range of opt ([first_layer, last_layer), -1 = to the end), checked.
  Status SetLayerRange(const HParams& hp, const LoadOptions& opt);
  // The tensors at the ends of the stack this range needs: the token embedding (first stage, or
  // last stage with tied embeddings), the output norm and head (last stage; the embedding when
  // tied). Left empty where the range does not need them.
  Status LoadEndWeights(const gguf::File& f, kernels::MatrixView* tok_embd,
                        std::vector<float>* output_norm, kernels::MatrixView* output) const;
  // x[r] = the embedding row of batch.tokens[r] for the batch's n_rows rows ([n_rows][n_embd]);
  // an error when the batch lacks ids or one is out of the vocabulary.
  Status EmbedTokens(const Batch& batch, const kernels::MatrixView& tok_embd, float* x) const;

  HParams hp_;
  int32_t first_ = 0;
  int32_t last_ = 0;
  WeightArena pretiled_;  // the matrices PretileMatrices laid out
};

}  // namespace shoal
