// kimi-k3 decoder forward (llama.cpp's models/kimi-k3.cpp): per layer res_mix -> norm ->
// KDA | MLA -> (banked ? a : x + a) -> res_mix -> norm -> situ FFN | latent MoE -> + ; logits
// from res_mix(x, output_res_score).
#include "model/kimi_k3.h"

#include <fmt/format.h>

#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/kda.h"
#include "model/mla_attention.h"
#include "model/moe.h"
#include "model/weights.h"

namespace shoal {
namespace {

using kernels::MatrixView;

struct Layer {
  std::vector<float> attn_norm, ffn_norm, attn_res, ffn_res;  // [n_embd]
  bool recurrent = false;
  KdaWeights kda;
  MlaWeights mla;
  bool moe = false;
  DenseFfn dense;
  MoeWeights experts;                 // in the latent space
  MatrixView routed_down, routed_up;  // [latent, n_embd], [n_embd, latent]
  std::vector<float> routed_norm;     // [latent] or empty
  DenseFfn shared;                    // full width, or empty
};

template <typename T>
void Grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

class KimiK3 final : public Model {
 public:
  Status Load(const gguf::File& f, const HParams& hp, const LoadOptions& opt);
  Status Forward(const Batch& batch, const float* hidden_in, KvStore& kv, ThreadPool* pool,
                 ForwardOutput* out) override;
  // One KdaState per KDA layer of the range, in layer order, in the sequence's state slot.
  int64_t StateFloatsPerSeq() const override { return n_kda_ * KdaState::Floats(hp_); }

 private:
  // out[n, E] = sum_j p_j stack_j + p_cur cur with p = softmax over the banked rows and cur of
  // sum(rmsnorm(.) * w); identity while nothing is banked.
  void ResMix(const float* cur, const std::vector<float>& w, int64_t n, float* out);
  void LatentMoe(const Layer& L, const float* xn, int64_t n, float* out, ThreadPool* pool);

  MlaOptions mla_;
  MoeConfig moe_;
  GluParams situ_;
  MatrixView tok_embd_, output_;
  std::vector<float> output_norm_, output_res_;
  std::vector<Layer> layers_;
  int64_t n_kda_ = 0;                      // KDA layers in [first, last)
  std::vector<std::vector<float>> stack_;  // banked layer inputs, each [n, E]
  int n_banked_ = 0;
  std::vector<float> x_, h_, xn_, tmp_, lat_, lat2_, sh_, rows_, scores_;
  MlaScratch mla_s_;
  KdaScratch kda_s_;
  MoeScratch moe_s_;
  FfnScratch ffn_s_;
  kernels::MatMulScratch mm_;
};

Status KimiK3::Load(const gguf::File& f, const HParams& hp, const LoadOptions& opt) {
  SHOAL_RETURN_IF_ERROR(SetLayerRange(hp, opt));
  // A later stage gets the banked attention-residual inputs with the hidden state
  // (HiddenPlanes); the KDA states of this range's layers live in this stage's state slots.
  const int64_t E = hp.n_embd;
  const int64_t lat = hp.n_expert_latent > 0 ? hp.n_expert_latent : E;
  SHOAL_RETURN_IF_ERROR(LoadEndWeights(f, &tok_embd_, &output_norm_, &output_));
  if (hp.attn_res_block_size > 0 && is_last_stage()) {
    SHOAL_ASSIGN_OR_RETURN(output_res_, LoadVector(f, "output_res_score.weight", E));
  }
  for (int il = first_; il < last_; ++il) {
    auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
    Layer L;
    SHOAL_ASSIGN_OR_RETURN(L.attn_norm, LoadVector(f, n("attn_norm.weight"), E));
    SHOAL_ASSIGN_OR_RETURN(L.ffn_norm, LoadVector(f, n("ffn_norm.weight"), E));
    if (hp.attn_res_block_size > 0) {
      SHOAL_ASSIGN_OR_RETURN(L.attn_res, LoadVector(f, n("attn_res_score.weight"), E));
      SHOAL_ASSIGN_OR_RETURN(L.ffn_res, LoadVector(f, n("ffn_res_score.weight"), E));
    }
    L.recurrent = hp.is_recurrent_layer(il);
    n_kda_ += L.recurrent;
    if (L.recurrent) {
      SHOAL_ASSIGN_OR_RETURN(L.kda, LoadKdaWeights(f, hp, il));
    } else {
      SHOAL_ASSIGN_OR_RETURN(L.mla, LoadMlaWeights(f, hp, il));
    }
    if (hp.is_moe_layer(il)) {
      L.moe = true;
      SHOAL_ASSIGN_OR_RETURN(L.experts, LoadMoeWeights(f, il, E, lat, hp.n_ff_exp, hp.n_expert));
      if (hp.n_expert_latent > 0) {
        SHOAL_ASSIGN_OR_RETURN(L.routed_down, LoadMatrix(f, n("ffn_routed_down.weight"), E, lat));
        SHOAL_ASSIGN_OR_RETURN(L.routed_up, LoadMatrix(f, n("ffn_routed_up.weight"), lat, E));
        SHOAL_ASSIGN_OR_RETURN(L.routed_norm,
                               LoadOptionalVector(f, n("ffn_routed_norm.weight"), lat));
      }
      if (f.FindTensor(n("ffn_gate_shexp.weight"))) {
        SHOAL_ASSIGN_OR_RETURN(
            L.shared, LoadDenseFfn(f, n("ffn_"), "_shexp.weight", E,
                                   hp.n_ff_exp * std::max<int64_t>(hp.n_expert_shared, 1)));
      }
    } else {
      SHOAL_ASSIGN_OR_RETURN(L.dense, LoadDenseFfn(f, n("ffn_"), ".weight", E, hp.n_ff));
    }
    layers_.push_back(std::move(L));
  }
  mla_.rope = false;  // K3's MLA is nope-only
  mla_.kq_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k_mla));
  situ_.kind = GluParams::kSitu;
  situ_.beta = hp.situ_beta;
  situ_.linear_beta = hp.situ_linear_beta;
  moe_ = MoeConfigFrom(hp);
  moe_.act = situ_;
  return Status::Ok();
}

void KimiK3::ResMix(const float* cur, const std::vector<float>& w, int64_t n, float* out) {
  const int64_t E = hp_.n_embd;
  if (n_banked_ == 0 || w.empty()) {
    std::copy(cur, cur + n * E, out);
    return;
  }
  const int nb = n_banked_;
  Grow(scores_, int64_t{nb + 1} + E);
  float* sc = scores_.data();
  float* tmp = scores_.data() + nb + 1;
  auto score = [&](const float* x) {
    kernels::RmsNorm(x, nullptr, tmp, E, hp_.rms_eps);
    double sum = 0;  // ggml_sum_rows of rms_norm(x) * w, in double
    for (int64_t i = 0; i < E; ++i) sum += static_cast<double>(tmp[i] * w[static_cast<size_t>(i)]);
    return static_cast<float>(sum);
  };
  for (int64_t r = 0; r < n; ++r) {
    for (int j = 0; j < nb; ++j) sc[j] = score(stack_[static_cast<size_t>(j)].data() + r * E);
    sc[nb] = score(cur + r * E);
    kernels::Softmax(sc, nb + 1);
    float* o = out + r * E;
    for (int64_t i = 0; i < E; ++i) o[i] = stack_[0][static_cast<size_t>(r * E + i)] * sc[0];
    for (int j = 1; j < nb; ++j)
      for (int64_t i = 0; i < E; ++i)
        o[i] += stack_[static_cast<size_t>(j)][static_cast<size_t>(r * E + i)] * sc[j];
    for (int64_t i = 0; i < E; ++i) o[i] += cur[r * E + i] * sc[nb];
  }
}

void KimiK3::LatentMoe(const Layer& L, const float* xn, int64_t n, float* out, ThreadPool* pool) {
  const int64_t E = hp_.n_embd;
  const float* z = xn;
  int64_t lat = E;
  if (L.routed_down.data) {
    lat = L.routed_down.rows;
    Grow(lat_, n * lat);
    kernels::MatMul(L.routed_down, xn, E, n, lat_.data(), lat, pool, &mm_);
    z = lat_.data();
  }
  // Router on the full-width input, experts on the latent one.
  Grow(lat2_, n * lat);
  RunMoe(moe_, L.experts, xn, E, z, lat, n, lat2_.data(), pool, &moe_s_);
  if (!L.routed_norm.empty())
    for (int64_t r = 0; r < n; ++r)
      kernels::RmsNorm(lat2_.data() + r * lat, L.routed_norm.data(), lat2_.data() + r * lat, lat,
                       hp_.rms_eps);
  if (L.routed_up.data) {
    kernels::MatMul(L.routed_up, lat2_.data(), lat, n, out, E, pool, &mm_);
  } else {
    std::copy(lat2_.data(), lat2_.data() + n * E, out);
  }
  if (L.shared.gate.data) {
    Grow(sh_, n * E);
    RunDenseFfn(L.shared, situ_, xn, E, n, sh_.data(), E, pool, &ffn_s_);
    kernels::AddInPlace(out, sh_.data(), n * E);
  }
}

Status KimiK3::Forward(const Batch& b, const float* hidden_in, KvStore& kv, ThreadPool* pool,
                       ForwardOutput* out) {
  const HParams& hp = hp_;
  const int64_t n = b.n_rows(), E = hp.n_embd;
  if (n == 0) return Status::Ok();
  // Recurrent state per chunk, in its KvStore slot: a sequence starting at 0 gets a fresh one;
  // any other chunk must continue where its state ends (the slot remembers the position).
  const int64_t per_layer = KdaState::Floats(hp);
  std::vector<float*> seq(b.chunks.size(), nullptr);
  for (size_t ci = 0; ci < b.chunks.size(); ++ci) {
    const SeqChunk& c = b.chunks[ci];
    const int64_t need = static_cast<int64_t>(c.pos0) + c.n_tokens;
    if (static_cast<int64_t>(c.blocks.size()) * kv.layout().block_size < need)
      return Errorf("sequence {}: block table holds {} blocks, {} positions needed", c.seq_id,
                    c.blocks.size(), need);
    if (n_kda_ == 0) continue;
    if (c.state_slot < 0 || c.state_slot >= kv.layout().n_state_slots ||
        kv.layout().state_floats != StateFloatsPerSeq())
      return Errorf(
          "kimi-k3: sequence {} has no recurrent-state slot (slot {} of {}; the executor must "
          "allot KvLayout::n_state_slots and the scheduler SchedConfig::state_slots)",
          c.seq_id, c.state_slot, kv.layout().n_state_slots);
    float* base = kv.State(c.state_slot);
    if (c.pos0 == 0) {
      std::fill(base, base + StateFloatsPerSeq(), 0.f);
    } else if (kv.StatePos(c.state_slot) != c.pos0) {
      return Errorf(
          "kimi-k3: sequence {} resumes at position {} but its recurrent state is at {} (a "
          "prefix-cache hit without its state snapshot copied, or a swap-in: it is not swapped)",
          c.seq_id, c.pos0, kv.StatePos(c.state_slot));
    }
    seq[ci] = base;
  }
  Grow(x_, n * E);
  Grow(h_, n * E);
  Grow(xn_, n * E);
  Grow(tmp_, n * E);
  float* x = x_.data();
  n_banked_ = 0;
  if (is_first_stage()) {
    if (Status st = EmbedTokens(b, tok_embd_, x); !st.ok()) return st;
  } else {
    // hidden_in: [HiddenPlanes(first)][n][E]: x, then the stack banked by the earlier stages.
    if (!hidden_in) return Errorf("a later pipeline stage needs hidden states as input");
    std::copy(hidden_in, hidden_in + n * E, x);
    n_banked_ = HiddenPlanes(first_) - 1;
    for (int j = 0; j < n_banked_; ++j) {
      if (static_cast<int>(stack_.size()) <= j) stack_.emplace_back();
      Grow(stack_[static_cast<size_t>(j)], n * E);
      const float* p = hidden_in + (j + 1) * n * E;
      std::copy(p, p + n * E, stack_[static_cast<size_t>(j)].data());
    }
  }
  std::vector<KdaState> views(b.chunks.size());
  std::vector<KdaState*> states(b.chunks.size());
  int64_t kda_i = 0;
  for (int32_t li = 0; li < static_cast<int32_t>(layers_.size()); ++li) {
    const Layer& L = layers_[static_cast<size_t>(li)];
    const int il = first_ + li;
    ResMix(x, L.attn_res, n, h_.data());
    bool banked = false;
    if (hp.attn_res_block_size > 0 && il % hp.attn_res_block_size == 0) {
      if (static_cast<int>(stack_.size()) <= n_banked_) stack_.emplace_back();
      Grow(stack_[static_cast<size_t>(n_banked_)], n * E);
      std::copy(x, x + n * E, stack_[static_cast<size_t>(n_banked_)].data());
      ++n_banked_;
      banked = true;
    }
    for (int64_t r = 0; r < n; ++r)
      kernels::RmsNorm(h_.data() + r * E, L.attn_norm.data(), xn_.data() + r * E, E, hp.rms_eps);
    if (L.recurrent) {
      for (size_t ci = 0; ci < b.chunks.size(); ++ci) {
        views[ci] = KdaState::At(hp, seq[ci] + kda_i * per_layer);
        states[ci] = &views[ci];
      }
      RunKda(hp, L.kda, xn_.data(), b, states, tmp_.data(), pool, &kda_s_);
      ++kda_i;
    } else {
      RunMla(hp, L.mla, mla_, xn_.data(), nullptr, b, kv, li, tmp_.data(), pool, &mla_s_);
    }
    if (banked) {
      std::copy(tmp_.data(), tmp_.data() + n * E, x);
    } else {
      kernels::AddInPlace(x, tmp_.data(), n * E);
    }
    ResMix(x, L.ffn_res, n, h_.data());
    for (int64_t r = 0; r < n; ++r)
      kernels::RmsNorm(h_.data() + r * E, L.ffn_norm.data(), xn_.data() + r * E, E, hp.rms_eps);
    if (L.moe) {
      LatentMoe(L, xn_.data(), n, tmp_.data(), pool);
    } else {
      RunDenseFfn(L.dense, situ_, xn_.data(), E, n, tmp_.data(), E, pool, &ffn_s_);
    }
    kernels::AddInPlace(x, tmp_.data(), n * E);
  }
  if (n_kda_ > 0)
    for (size_t ci = 0; ci < b.chunks.size(); ++ci)
      kv.StatePos(b.chunks[ci].state_slot) = b.chunks[ci].pos0 + b.chunks[ci].n_tokens;
  if (!is_last_stage()) {
    // [HiddenPlanes(last)][n][E]: x, then every banked input (the next stage's res_mix reads them).
    if (n_banked_ + 1 != HiddenPlanes(last_))
      return Errorf("kimi-k3: {} banked inputs at layer {}, {} planes expected", n_banked_, last_,
                    HiddenPlanes(last_));
    out->hidden.resize(static_cast<size_t>((n_banked_ + 1) * n * E));
    std::copy(x, x + n * E, out->hidden.begin());
    for (int j = 0; j < n_banked_; ++j)
      std::copy(stack_[static_cast<size_t>(j)].data(),
                stack_[static_cast<size_t>(j)].data() + n * E,
                out->hidden.begin() + (j + 1) * n * E);
    return Status::Ok();
  }

  ResMix(x, output_res_, n, h_.data());
  const int64_t n_out = static_cast<int64_t>(b.out_rows.size());
  Grow(rows_, n_out * E);
  for (int64_t i = 0; i < n_out; ++i) {
    const int32_t r = b.out_rows[static_cast<size_t>(i)];
    if (r < 0 || r >= n) return Errorf("output row {} outside the batch of {} rows", r, n);
    kernels::RmsNorm(h_.data() + r * E, output_norm_.data(), rows_.data() + i * E, E, hp.rms_eps);
  }
  out->logits.resize(static_cast<size_t>(n_out * hp.n_vocab));
  kernels::MatMul(output_, rows_.data(), E, n_out, out->logits.data(), hp.n_vocab, pool, &mm_);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Model>> LoadKimiK3(const gguf::File& f, const HParams& hp,
                                          const LoadOptions& opt) {
  auto m = std::make_unique<KimiK3>();
  SHOAL_RETURN_IF_ERROR(m->Load(f, hp, opt));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace shoal
