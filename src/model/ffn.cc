// Gated activations and the dense FFN.
#include "model/ffn.h"

#include <cmath>

#include "kernels/ops.h"
#include "model/weights.h"

namespace shoal {

namespace {
// ggml's sigmoid: 1 / (1 + exp(-x)).
[[maybe_unused]] inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
}  // namespace

void ApplyGlu(const GluParams& p, const float* g, const float* u, float* y, int64_t n) {
  if (p.kind == GluParams::kSwiGlu) {
    kernels::SwiGlu(g, u, y, n);
    return;
  }
  // As llama.cpp's kimi_k3_situ: scale(tanh(scale(x, 1/beta)), beta); linear_beta <= 0 leaves
  // the up branch as is.
  const float ib = 1.0f / p.beta, il = p.linear_beta > 0 ? 1.0f / p.linear_beta : 0.f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = (std::tanh(g[i] * ib) * p.beta) * Sigmoid(g[i]);
    const float b = p.linear_beta > 0 ? std::tanh(u[i] * il) * p.linear_beta : u[i];
    y[i] = a * b;
  }
}

Result<DenseFfn> LoadDenseFfn(const gguf::File& f, const std::string& prefix,
                              const std::string& suffix, int64_t n_embd, int64_t n_ff) {
  DenseFfn w;
  SHOAL_ASSIGN_OR_RETURN(w.gate, LoadMatrix(f, prefix + "gate" + suffix, n_embd, n_ff));
  SHOAL_ASSIGN_OR_RETURN(w.up, LoadMatrix(f, prefix + "up" + suffix, n_embd, n_ff));
  SHOAL_ASSIGN_OR_RETURN(w.down, LoadMatrix(f, prefix + "down" + suffix, n_ff, n_embd));
  return w;
}

void RunDenseFfn(const DenseFfn& w, const GluParams& act, const float* x, int64_t ldx, int64_t n,
                 float* y, int64_t ldy, ThreadPool* pool, FfnScratch* s) {
  const int64_t F = w.n_ff();
  if (static_cast<int64_t>(s->g.size()) < n * F) s->g.resize(static_cast<size_t>(n * F));
  if (static_cast<int64_t>(s->u.size()) < n * F) s->u.resize(static_cast<size_t>(n * F));
  kernels::MatMul(w.gate, x, ldx, n, s->g.data(), F, pool, &s->mm);
  kernels::MatMul(w.up, x, ldx, n, s->u.data(), F, pool, &s->mm);
  ApplyGlu(act, s->g.data(), s->u.data(), s->g.data(), n * F);
  kernels::MatMul(w.down, s->g.data(), F, n, y, ldy, pool, &s->mm);
}

}  // namespace shoal
