// Gated feed-forward building blocks shared by the decoders: activations and a dense FFN.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "threading/thread_pool.h"

namespace shoal {

// The gated activation y = act(g) * u of an FFN.
struct GluParams {
  enum Kind { kSwiGlu, kSitu } kind = kSwiGlu;
  // situ (Kimi K3): y = beta*tanh(g/beta)*sigmoid(g) * lbeta*tanh(u/lbeta).
  float beta = 0.f, linear_beta = 0.f;
};
// y[i] = act(g[i], u[i]); y may alias g.
void ApplyGlu(const GluParams& p, const float* g, const float* u, float* y, int64_t n);

// down(act(gate x, up x)): gate/up [n_ff, n_embd], down [n_embd, n_ff].
struct DenseFfn {
  kernels::MatrixView gate, up, down;
  int64_t n_ff() const { return gate.rows; }
};

// Loads "<prefix>gate<suffix>", "<prefix>up<suffix>", "<prefix>down<suffix>".
Result<DenseFfn> LoadDenseFfn(const gguf::File& f, const std::string& prefix,
                              const std::string& suffix, int64_t n_embd, int64_t n_ff);

// Scratch of the FFN (grows to the largest batch, never shrinks).
struct FfnScratch {
  std::vector<float> g, u;
  kernels::MatMulScratch mm;
};

// y[n, ldy] = ffn(x[n, ldx]) (overwrites y).
void RunDenseFfn(const DenseFfn& w, const GluParams& act, const float* x, int64_t ldx, int64_t n,
                 float* y, int64_t ldy, ThreadPool* pool, FfnScratch* s);

}  // namespace shoal
