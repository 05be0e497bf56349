// Kimi Delta Attention (Kimi Linear / Kimi K3 recurrent layers): short causal convolutions on
// q/k/v, per-channel decay gate, delta-rule update of a fixed-size state per sequence and head.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/batch.h"
#include "model/hparams.h"
#include "threading/thread_pool.h"

namespace shoal {

struct KdaWeights {
  kernels::MatrixView wq, wk, wv;             // [d_inner, n_embd]
  std::vector<float> conv_q, conv_k, conv_v;  // [d_inner][d_conv] depthwise causal conv
  kernels::MatrixView f_a, f_b;               // [head_dim, n_embd], [d_inner, head_dim]
  kernels::MatrixView beta;                   // [n_head, n_embd]
  std::vector<float> a;                       // [n_head] = -exp(A_log)
  std::vector<float> dt_bias;                 // [d_inner]
  kernels::MatrixView g;                      // [d_inner, n_embd] output gate
  std::vector<float> o_norm;                  // [head_dim]
  kernels::MatrixView wo;                     // [n_embd, d_inner]
};

Result<KdaWeights> LoadKdaWeights(const gguf::File& f, const HParams& hp, int il);

// One sequence's recurrent state for one KDA layer (F32, as llama.cpp keeps it): a view into
// the sequence's KvStore state slot.
struct KdaState {
  float* conv = nullptr;  // [3][d_conv - 1][d_inner]: previous projected q, k, v inputs
  float* s = nullptr;     // [n_head][head_dim (key)][head_dim (value)]
  static int64_t ConvFloats(const HParams& hp);
  static int64_t Floats(const HParams& hp);  // conv + s
  // The view of a layer state starting at `base` (Floats(hp) values).
  static KdaState At(const HParams& hp, float* base);
  void Reset(const HParams& hp);  // zeroes both
};

struct KdaScratch {
  std::vector<float> q, k, v, fa, gate, beta, og, o;
  kernels::MatMulScratch mm;
};

// out[n, n_embd] for the batch rows xn [n, n_embd]; states[c] is chunk c's state (updated).
void RunKda(const HParams& hp, const KdaWeights& w, const float* xn, const Batch& b,
            std::vector<KdaState*>& states, float* out, ThreadPool* pool, KdaScratch* s);

}  // namespace shoal
