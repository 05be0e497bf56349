// deepseek2 decoder forward: embeddings -> [MLA + (dense FFN | routed + shared experts)] x
// layers -> norm -> logits.
#include "model/mla_decoder.h"

#include <fmt/format.h>

#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/mla_attention.h"
#include "model/moe.h"
#include "model/weights.h"

namespace shoal {

MlaScales DeepseekScales(const HParams& hp) {
  MlaScales s;
  float mscale = 1.f;
  if (hp.rope_yarn && hp.rope_freq_scale != 1.f) {
    const float l = std::log(1.0f / hp.rope_freq_scale);
    s.rope_attn_factor = 1.0f / (1.0f + 0.1f * l);
    const float attn_factor_org = s.rope_attn_factor * (1.0f + 0.1f * l);
    mscale = attn_factor_org * (1.0f + hp.yarn_log_mul * l);
  }
  s.kq_scale = mscale * mscale / std::sqrt(static_cast<float>(hp.head_dim_k_mla));
  return s;
}

namespace {

using kernels::MatrixView;

struct Layer {
  std::vector<float> attn_norm, ffn_norm;  // [n_embd]
  MlaWeights attn;
  bool moe = false;
  DenseFfn dense;      // leading dense layers [n_ff]
  MoeWeights experts;  // routed experts [n_ff_exp]
  DenseFfn shared;     // shared experts [n_ff_exp * n_expert_shared], if any
};

template <typename T>
void Grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

class MlaDecoder final : public Model {
 public:
  Status Load(const gguf::File& f, const HParams& hp, const LoadOptions& opt);
  Status Forward(const Batch& batch, const float* hidden_in, KvStore& kv, ThreadPool* pool,
                 ForwardOutput* out) override;

 private:
  MlaOptions mla_;
  MoeConfig moe_;
  MatrixView tok_embd_, output_;
  std::vector<float> output_norm_;
  std::vector<Layer> layers_;
  // Scratch, grown to the largest batch (no allocation in steady state).
  std::vector<float> x_, xn_, tmp_, sh_, rows_, rope_;
  MlaScratch mla_s_;
  MoeScratch moe_s_;
  FfnScratch ffn_s_;
  kernels::MatMulScratch mm_;
};

Status MlaDecoder::Load(const gguf::File& f, const HParams& hp, const LoadOptions& opt) {
  SHOAL_RETURN_IF_ERROR(SetLayerRange(hp, opt));
  const int64_t E = hp.n_embd;
  SHOAL_RETURN_IF_ERROR(LoadEndWeights(f, &tok_embd_, &output_norm_, &output_));
  for (int il = first_; il < last_; ++il) {
    auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
    Layer L;
    SHOAL_ASSIGN_OR_RETURN(L.attn_norm, LoadVector(f, n("attn_norm.weight"), E));
    SHOAL_ASSIGN_OR_RETURN(L.ffn_norm, LoadVector(f, n("ffn_norm.weight"), E));
    SHOAL_ASSIGN_OR_RETURN(L.attn, LoadMlaWeights(f, hp, il));
    if (hp.is_moe_layer(il)) {
      L.moe = true;
      SHOAL_ASSIGN_OR_RETURN(L.experts, LoadMoeWeights(f, il, E, E, hp.n_ff_exp, hp.n_expert));
      if (hp.n_expert_shared > 0) {
        SHOAL_ASSIGN_OR_RETURN(L.shared, LoadDenseFfn(f, n("ffn_"), "_shexp.weight", E,
                                                      hp.n_ff_exp * hp.n_expert_shared));
      }
    } else {
      SHOAL_ASSIGN_OR_RETURN(L.dense, LoadDenseFfn(f, n("ffn_"), ".weight", E, hp.n_ff));
    }
    layers_.push_back(std::move(L));
  }
  const MlaScales sc = DeepseekScales(hp);
  mla_.rope = true;
  mla_.kq_scale = sc.kq_scale;
  kernels::RopeParams& rp = mla_.rope_params;
  rp.n_rot = static_cast<int>(hp.n_rot);
  rp.freq_base = hp.rope_freq_base;
  rp.freq_scale = hp.rope_freq_scale;
  rp.mode = kernels::RopeMode::kNorm;
  rp.n_ctx_orig = static_cast<int>(hp.rope_n_ctx_orig);
  rp.attn_factor = sc.rope_attn_factor;
  if (hp.rope_yarn) rp.ext_factor = 1.0f;
  moe_ = MoeConfigFrom(hp);
  return Status::Ok();
}

Status MlaDecoder::Forward(const Batch& b, const float* hidden_in, KvStore& kv, ThreadPool* pool,
                           ForwardOutput* out) {
  const HParams& hp = hp_;
  const int64_t n = b.n_rows(), E = hp.n_embd;
  if (n == 0) return Status::Ok();
  for (const SeqChunk& c : b.chunks) {
    const int64_t need = static_cast<int64_t>(c.pos0) + c.n_tokens;
    if (static_cast<int64_t>(c.blocks.size()) * kv.layout().block_size < need)
      return Errorf("sequence {}: block table holds {} blocks, {} positions needed", c.seq_id,
                    c.blocks.size(), need);
  }
  Grow(x_, n * E);
  Grow(xn_, n * E);
  Grow(tmp_, n * E);
  Grow(sh_, n * E);
  Grow(rope_, n * hp.n_rot);
  float* x = x_.data();
  float* xn = xn_.data();
  if (is_first_stage()) {
    if (Status st = EmbedTokens(b, tok_embd_, x); !st.ok()) return st;
  } else {
    if (!hidden_in) return Errorf("a later pipeline stage needs hidden states as input");
    std::copy(hidden_in, hidden_in + n * E, x);
  }
  for (const SeqChunk& c : b.chunks)
    for (int32_t i = 0; i < c.n_tokens; ++i)
      kernels::RopeCache(mla_.rope_params, c.pos0 + i,
                         &rope_[static_cast<size_t>((c.row0 + i) * hp.n_rot)]);

  for (int32_t li = 0; li < static_cast<int32_t>(layers_.size()); ++li) {
    const Layer& L = layers_[static_cast<size_t>(li)];
    for (int64_t r = 0; r < n; ++r)
      kernels::RmsNorm(x + r * E, L.attn_norm.data(), xn + r * E, E, hp.rms_eps);
    RunMla(hp, L.attn, mla_, xn, rope_.data(), b, kv, li, tmp_.data(), pool, &mla_s_);
    for (int64_t r = 0; r < n; ++r) {
      kernels::AddInPlace(x + r * E, tmp_.data() + r * E, E);
      kernels::RmsNorm(x + r * E, L.ffn_norm.data(), xn + r * E, E, hp.rms_eps);
    }
    if (L.moe) {
      RunMoe(moe_, L.experts, xn, E, xn, E, n, tmp_.data(), pool, &moe_s_);
      if (L.shared.gate.data) {
        RunDenseFfn(L.shared, GluParams{}, xn, E, n, sh_.data(), E, pool, &ffn_s_);
        kernels::AddInPlace(tmp_.data(), sh_.data(), n * E);  // moe_out + shared
      }
    } else {
      RunDenseFfn(L.dense, GluParams{}, xn, E, n, tmp_.data(), E, pool, &ffn_s_);
    }
    kernels::AddInPlace(x, tmp_.data(), n * E);
  }

  if (!is_last_stage()) {
    out->hidden.assign(x, x + n * E);
    return Status::Ok();
  }
  const int64_t n_out = static_cast<int64_t>(b.out_rows.size());
  Grow(rows_, n_out * E);
  for (int64_t i = 0; i < n_out; ++i) {
    const int32_t r = b.out_rows[static_cast<size_t>(i)];
    if (r < 0 || r >= n) return Errorf("output row {} outside the batch of {} rows", r, n);
    kernels::RmsNorm(x + r * E, output_norm_.data(), rows_.data() + i * E, E, hp.rms_eps);
  }
  out->logits.resize(static_cast<size_t>(n_out * hp.n_vocab));
  kernels::MatMul(output_, rows_.data(), E, n_out, out->logits.data(), hp.n_vocab, pool, &mm_);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Model>> LoadMlaDecoder(const gguf::File& f, const HParams& hp,
                                              const LoadOptions& opt) {
  auto m = std::make_unique<MlaDecoder>();
  SHOAL_RETURN_IF_ERROR(m->Load(f, hp, opt));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace shoal
