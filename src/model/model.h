// A loaded model (or a layer range of one) and its forward pass over a Batch.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "kvcache/kv_store.h"
#include "model/batch.h"
#include "model/ffn.h"
#include "model/hparams.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"
#include "threading/thread_pool.h"

namespace shoal {

struct LoadOptions {
  int32_t first_layer = 0;
  int32_t last_layer = -1;  // exclusive; -1 = n_layer
  // Lay out the matrices the tiled kernels can read in place once at load (PretileMatrices);
  // false keeps every weight in the file's mapping (then each batched matmul repacks panels).
  bool pretile = true;
  // Member of a tensor-parallel group (model/tensor_parallel.h): loads only its slices of the
  // layers and the head; Forward then needs the group's communicator (SetTpComm).
  TpShard tp;
};

struct ForwardOutput {
  std::vector<float> logits;  // [out_rows.size(), n_vocab] when the range ends at the last layer
  // When it does not: [HiddenPlanes(last_layer)][n_rows][n_embd], plane 0 the hidden state.
  std::vector<float> hidden;
};

// The frame every architecture shares. Model::Forward (written once, in model.cc) checks the
// batch's block tables and recurrent-state slots, embeds the tokens (first stage) or reads the
// hidden planes of the stage before, runs this stage's layers one RunLayer call each, and emits
// the output head's logits (last stage) or the hidden planes. An architecture (its folder in
// model/arch/ and a row in the table of model/arch/arch.cc) supplies its layers: LoadLayers,
// RunLayer, and optionally BeginStep, HeadInput and a recurrent state (StateFloatsPerSeq).
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

  const TpShard& tp() const { return tp_; }
  // The group's all-gather (not owned; must outlive the Forward calls). Required when
  // tp().size > 1; every member must run the same batches in the same order.
  void SetTpComm(TpComm* comm) { comm_.Set(comm); }
  // The collectives' cost so far (a tensor-parallel member; zeros otherwise).
  const TpStats& tp_stats() const { return comm_.stats(); }
  // [local layer][expert]: the rows routed to each expert so far (empty for a layer without
  // routed experts, or an architecture that does not count them): the trace expert placement
  // is planned from (planner/expert_placement.h).
  const std::vector<std::vector<int64_t>>& ExpertLoad() const { return expert_load_; }

  // Runs layers [first, last) over the batch. The first stage embeds batch.tokens; later
  // stages read hidden_in [HiddenPlanes(first)][n_rows][n_embd]. Before the call, every
  // chunk's block table must cover positions [0, pos0 + n_tokens). Writes out->logits or
  // out->hidden.
  Status Forward(const Batch& batch, const float* hidden_in, KvStore& kv, ThreadPool* pool,
                 ForwardOutput* out);

 protected:
  // What an architecture supplies.
  // Loads layers [first_, last_) (hp_, the range and the end weights are set already) and
  // whatever else it needs (pretiling its matrices when opt.pretile).
  virtual Status LoadLayers(const gguf::File& f, const LoadOptions& opt) = 0;
  // Once per step before the first layer: scratch grown to the batch's n_rows, per-row tables.
  virtual void BeginStep(const Batch& b) {}
  // Layer first_ + li over the batch: x [n_rows, n_embd], the residual stream, in place.
  virtual void RunLayer(int32_t li, const Batch& b, KvStore& kv, ThreadPool* pool, float* x) = 0;
  // The rows the output norm reads ([n_rows, n_embd]): x, unless the architecture mixes more in.
  virtual const float* HeadInput(const float* x, int64_t n) { return x; }
  // Whether LoadLayers can load a member's slices (LoadOptions::tp); Load refuses a split
  // otherwise.
  virtual bool SupportsTensorParallel() const { return false; }
  // Whether it can also split the fast way (TpShard::fast).
  virtual bool SupportsFastTensorParallel() const { return false; }
  // Widths of the K and V rows this model caches per layer (a tensor-parallel member caches
  // only the KV heads its query heads read).
  virtual int64_t CacheKDim() const { return hp_.cache_k_dim(); }
  virtual int64_t CacheVDim() const { return hp_.cache_v_dim(); }

  // What the frame offers the layers.
  // Planes carried across layers besides x (kimi-k3's banked attention-residual inputs), each
  // [n_rows, n_embd]: the frame reads them from hidden_in and emits them after x; layers append.
  int n_carried() const { return n_carried_; }
  const float* carried(int j) const { return carried_[static_cast<size_t>(j)].data(); }
  void Carry(const float* x, int64_t n);
  // Tensor parallel: whether this model is one member's slice, and the column gather of a
  // [n, cols[rank]] block into out [n, sum(cols)]. A failed gather fills out with zeros and
  // fails the Forward call after the layer (RunLayer has no status of its own).
  bool split() const { return tp_.size > 1; }
  TpComm* comm() { return &comm_; }
  void Gather(ColumnGather& g, const float* mine, int64_t n, float* out);
  // out [n, g.total()] = x [n, w.cols] times the rows of w this member holds, gathered (the
  // whole product when not split). mm: the caller's matmul scratch.
  void MatMulGather(const kernels::MatrixView& w, const float* x, int64_t n, ColumnGather& g,
                    float* out, ThreadPool* pool, kernels::MatMulScratch* mm);
  // A split member's slice of a dense FFN: gate/up rows `ff`, down rows embd_rows_.
  DenseFfn SliceFfn(const DenseFfn& f, Slice ff) const;
  // out [n, E] = the dense FFN f over xn when f is SliceFfn's part: xn [n, E] -> this member's
  // FFN columns [n, nf] -> gathered by g [n, F] -> its rows of down -> gathered [n, E]. Each
  // element is computed whole, so the bits are RunDenseFfn's.
  void SplitFfn(const DenseFfn& f, const GluParams& act, ColumnGather& g, const float* xn,
                int64_t n, float* out, ThreadPool* pool, FfnScratch* s);
  // Records the first failure of a collective in this step.
  void FailStep(Status s);
  // Chunk c's recurrent state this step (StateFloatsPerSeq() floats in its KvStore slot, zeroed
  // when the chunk starts at position 0), or null when the model keeps none.
  float* chunk_state(size_t c) const { return states_[c]; }

  HParams hp_;
  int32_t first_ = 0;
  int32_t last_ = 0;
  kernels::MatrixView tok_embd_;  // first stage, or last stage with tied embeddings
  kernels::MatrixView output_;    // last stage: the head (the embedding when tied)
  std::vector<float> output_norm_;
  WeightArena pretiled_;  // the matrices PretileMatrices laid out
  TpShard tp_;
  // A split member's rows of the projections back to the residual (output, down): embedding
  // columns SliceOf(n_embd), and their gather.
  Slice embd_rows_;
  ColumnGather embd_gather_;
  std::vector<std::vector<int64_t>> expert_load_;  // ExpertLoad

 private:
  // Takes hp and the layer range of opt ([first_layer, last_layer), -1 = to the end), checked.
  Status SetLayerRange(const HParams& hp, const LoadOptions& opt);
  // The tensors at the ends of the stack this range needs: the token embedding (first stage, or
  // last stage with tied embeddings), the output norm and head (last stage; the embedding when
  // tied).
  Status LoadEndWeights(const gguf::File& f);
  // Every chunk's block table covers its positions; with a recurrent state, every chunk has a
  // slot whose state starts fresh (pos0 == 0, zeroed here) or continues at pos0. Sets states_.
  Status BindChunks(const Batch& b, KvStore& kv);
  // x_ [n_rows, n_embd] = the embedding rows of batch.tokens (first stage) or plane 0 of
  // hidden_in, whose further planes become the carried ones.
  Status ReadInput(const Batch& b, const float* hidden_in);
  // out->hidden = [x, carried planes] (a stage before the last) or out->logits = the head over
  // HeadInput's out_rows.
  Status EmitOutput(const Batch& b, ThreadPool* pool, ForwardOutput* out);

  std::vector<float> x_;                     // [n_rows, n_embd] the residual stream
  std::vector<std::vector<float>> carried_;  // n_carried_ planes in use, each [n_rows, n_embd]
  int n_carried_ = 0;
  std::vector<float*> states_;    // [chunk] recurrent state, or null
  std::vector<float> head_rows_;  // [out_rows, n_embd] normed rows the head reads
  kernels::MatMulScratch head_mm_;
  MeteredComm comm_;
  Status step_status_;               // the first failed collective of this Forward call
  ColumnGather head_gather_;         // the head's vocabulary slices
  std::vector<float> gather_local_;  // MatMulGather's [n, rows of w this member holds]
  std::vector<float> ffn_all_;       // SplitFfn's gathered activations [n, F]
};

}  // namespace shoal
