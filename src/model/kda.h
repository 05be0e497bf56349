// Kimi Delta Attention (Kimi Linear / Kimi K3 recurrent layers): short causal convolutions on
// q/k/v, per-channel decay gate, delta-rule update of a fixed-size state per sequence and head.
#pragma once

#include <cstdint>
#include <vector>

#include "base/even_split.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/batch.h"
#include "model/hparams.h"
#include "threading/thread_pool.h"

namespace shoal {

// d_inner = heads x head_dim, where heads is every head or a tensor-parallel member's slice of
// them (SliceKdaHeads); a.size() is that head count.
struct KdaWeights {
  kernels::MatrixView wq, wk, wv;             // [d_inner, n_embd]
  std::vector<float> conv_q, conv_k, conv_v;  // [d_inner][d_conv] depthwise causal conv
  kernels::MatrixView f_a, f_b;               // [head_dim, n_embd], [d_inner, head_dim]
  kernels::MatrixView beta;                   // [n_head, n_embd]
  std::vector<float> a;                       // [n_head] = -exp(A_log)
  std::vector<float> dt_bias;                 // [d_inner]
  kernels::MatrixView g;                      // [d_inner, n_embd] output gate
  std::vector<float> o_norm;                  // [head_dim]
  kernels::MatrixView wo;                     // [n_embd, d_inner of every head]
  int64_t heads() const { return static_cast<int64_t>(a.size()); }
};

Result<KdaWeights> LoadKdaWeights(const gguf::File& f, const HParams& hp, int il);
// A tensor-parallel member's part of w: the q/k/v/gate/f_b/beta rows, conv taps, decays and
// biases of `heads` (each head's recurrence reads only its own channels), and the output
// projection's rows `emb` (embedding columns); f_a and the output norm whole.
KdaWeights SliceKdaHeads(const KdaWeights& w, const HParams& hp, Slice heads, Slice emb);

// One sequence's recurrent state for one KDA layer (F32, as llama.cpp keeps it): a view into
// the sequence's KvStore state slot.
struct KdaState {
  float* conv = nullptr;  // [3][d_conv - 1][d_inner]: previous projected q, k, v inputs
  float* s = nullptr;     // [heads][head_dim (key)][head_dim (value)]
  // heads: the heads the layer's weights hold (KdaWeights::heads()).
  static int64_t ConvFloats(const HParams& hp, int64_t heads);
  static int64_t Floats(const HParams& hp, int64_t heads);  // conv + s
  // The view of a layer state starting at `base` (Floats(hp, heads) values).
  static KdaState At(const HParams& hp, int64_t heads, float* base);
};

struct KdaScratch {
  std::vector<float> q, k, v, fa, gate, beta, og, o;
  kernels::MatMulScratch mm;
};

// out[n, n_embd] for the batch rows xn [n, n_embd]; states[c] is chunk c's state (updated).
void RunKda(const HParams& hp, const KdaWeights& w, const float* xn, const Batch& b,
            std::vector<KdaState*>& states, float* out, ThreadPool* pool, KdaScratch* s);
// RunKda without the output projection: the gated, normed head outputs [n, heads x head_dim]
// of the heads w holds (in s->o).
const float* RunKdaHeads(const HParams& hp, const KdaWeights& w, const float* xn, const Batch& b,
                         std::vector<KdaState*>& states, ThreadPool* pool, KdaScratch* s);

}  // namespace shoal
