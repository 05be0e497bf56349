// Mixture-of-experts feed-forward: router, top-k selection, and one MatMul per expert the batch
// routes to, over that expert's tokens (the other experts' weights are never read).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/ffn.h"
#include "model/hparams.h"
#include "model/tensor_parallel.h"

namespace shoal {

// A 3-D expert tensor ne = [cols, rows, n_expert]: expert e is a [rows, cols] matrix.
struct ExpertMatrices {
  kernels::MatrixView first;  // expert 0
  uint64_t stride = 0;        // bytes between consecutive experts
  kernels::MatrixView Expert(int64_t e) const {
    kernels::MatrixView m = first;
    m.data += static_cast<uint64_t>(e) * stride;
    return m;
  }
};

struct MoeWeights {
  kernels::MatrixView router;     // ffn_gate_inp [n_expert, n_router_in]
  std::vector<float> probs_bias;  // exp_probs_b [n_expert]: added for selection only; or empty
  ExpertMatrices gate, up;        // [n_ff_exp, n_in] per expert
  ExpertMatrices down;            // [n_in, n_ff_exp] per expert
};

struct MoeConfig {
  int64_t n_expert = 0;
  int64_t n_used = 0;
  GatingFunc gating = GatingFunc::kSoftmax;
  bool norm_w = false;  // weights /= max(sum, 6.1035e-5) (the smallest normal F16, as llama.cpp)
  float scale = 0.f;    // weights *= scale unless 0 or 1
  GluParams act;
};

MoeConfig MoeConfigFrom(const HParams& hp);

// Loads blk.<il>.ffn_{gate_inp,gate_exps,up_exps,down_exps}.weight and exp_probs_b.bias.
// n_in: the experts' input width; n_router_in: the router's.
Result<MoeWeights> LoadMoeWeights(const gguf::File& f, int il, int64_t n_router_in, int64_t n_in,
                                  int64_t n_ff_exp, int64_t n_expert);

struct MoeScratch {
  std::vector<float> logits;          // [n, n_expert]
  std::vector<float> sel;             // [n_expert] selection scores of one row
  std::vector<int32_t> order, fill;   // [n_expert]
  std::vector<int32_t> chosen;        // [n, n_used] expert ids in top-k order
  std::vector<float> weights;         // [n, n_used]
  std::vector<int32_t> offsets;       // [n_expert + 1] start of each expert's list in `slots`
  std::vector<int32_t> slots;         // [n * n_used] row * n_used + k, grouped by expert
  std::vector<float> xg, yg;          // gathered inputs [m, n_in] and outputs [m, n_in]
  std::vector<float> expert_out;      // [n, n_used, n_in]
  std::vector<float> mine, gathered;  // expert parallel: this member's and all slot outputs
  std::vector<int64_t> counts;        // [member] floats each member sends
  FfnScratch ffn;
};

// Expert parallel inside a tensor-parallel group: member `rank` of `size` runs only experts
// SliceOf(n_expert, size, rank) and the group gathers every expert's outputs (in the slot order
// all members derive from the same routing) before the weighted sum, so every member gets the
// single-process bits. A failed gather sets *status (the first failure) and zeros the output.
struct MoeShard {
  TpComm* comm = nullptr;
  int rank = 0, size = 1;
  Status* status = nullptr;
};

// out[n, n_in] = sum over the top-k experts of w_k * expert_k(x), summed in top-k order like
// llama.cpp (((e0 w0) + e1 w1) + ...). xr [n, ldr]: router input; x [n, ldx]: expert input.
// Each row's result is independent of the other rows (MatMul is per-row exact), so grouping
// tokens by expert keeps batch invariance. routed (n_expert counters, when given) adds the rows
// each expert was chosen for (Model::ExpertLoad).
void RunMoe(const MoeConfig& cfg, const MoeWeights& w, const float* xr, int64_t ldr, const float* x,
            int64_t ldx, int64_t n, float* out, ThreadPool* pool, MoeScratch* s,
            const MoeShard* shard = nullptr, int64_t* routed = nullptr);

}  // namespace shoal
