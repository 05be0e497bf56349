// Architecture "deepseek2": its hyper-parameter rules and its layer, x += MLA(rmsnorm(x));
// x += dense FFN (leading layers) or routed + shared experts (rmsnorm(x)). A tensor-parallel
// member (model/tensor_parallel.h) holds a slice of the heads (the latent path whole), of the
// dense and shared FFN columns, of the experts and of the output rows, and gathers them.
#include "model/arch/deepseek2/deepseek2.h"

#include <fmt/format.h>

#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/mla_attention.h"
#include "model/model.h"
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

// Hyper-parameters after ReadCommonHParams.
Status LoadDeepseek2HParams(const gguf::File& f, HParams* hp) {
  hp->rope_type = RopeType::kNorm;
  SHOAL_RETURN_IF_ERROR(ReadMlaHParams(f, hp));
  SHOAL_RETURN_IF_ERROR(ReadMoeHParams(f, hp));
  if (hp->n_expert == 0) return Errorf("{}: deepseek2 without expert_count", f.path());
  // llama.cpp: files older than expert_gating_func used softmax.
  if (!f.Find("deepseek2.expert_gating_func")) hp->gating = GatingFunc::kSoftmax;
  if (hp->n_expert_shared > 0 && hp->n_ff_exp <= 0)
    return Errorf("{}: shared experts without expert_feed_forward_length", f.path());
  return Status::Ok();
}

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

class Deepseek2 final : public Model {
 private:
  Status LoadLayers(const gguf::File& f, const LoadOptions& opt) override;
  void BeginStep(const Batch& b) override;
  void RunLayer(int32_t li, const Batch& b, KvStore& kv, ThreadPool* pool, float* x) override;
  bool SupportsTensorParallel() const override { return true; }
  // A split member's heads, and the gathers of its slices.
  Slice qh_;
  ColumnGather att_g_, ff_g_, sh_g_;
  std::vector<float> o_all_;

  MlaOptions mla_;
  MoeConfig moe_;
  std::vector<Layer> layers_;
  // Scratch, grown to the largest batch (no allocation in steady state).
  std::vector<float> xn_, tmp_, sh_, rope_;
  MlaScratch mla_s_;
  MoeScratch moe_s_;
  FfnScratch ffn_s_;
};

Status Deepseek2::LoadLayers(const gguf::File& f, const LoadOptions& opt) {
  const HParams& hp = hp_;
  const int64_t E = hp.n_embd;
  const int T = tp_.size, r = tp_.rank;
  const int64_t sh_ff = hp.n_ff_exp * hp.n_expert_shared;
  qh_ = SliceOf(hp.n_head, T, r);
  att_g_.SetCols(SliceWidths(hp.n_head, T, hp.head_dim_v_mla), r);
  ff_g_.SetCols(SliceWidths(hp.n_ff, T), r);
  sh_g_.SetCols(SliceWidths(sh_ff, T), r);
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
    expert_load_.emplace_back(L.moe ? static_cast<size_t>(hp.n_expert) : 0, 0);
    if (split()) {
      L.attn = SliceMlaHeads(L.attn, hp, qh_, embd_rows_);
      if (L.moe && L.shared.gate.data) L.shared = SliceFfn(L.shared, SliceOf(sh_ff, T, r));
      if (!L.moe) L.dense = SliceFfn(L.dense, SliceOf(hp.n_ff, T, r));
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

void Deepseek2::BeginStep(const Batch& b) {
  const HParams& hp = hp_;
  const int64_t n = b.n_rows(), E = hp.n_embd;
  Grow(xn_, n * E);
  Grow(tmp_, n * E);
  Grow(sh_, n * E);
  Grow(rope_, n * hp.n_rot);
  for (const SeqChunk& c : b.chunks)
    for (int32_t i = 0; i < c.n_tokens; ++i)
      kernels::RopeCache(mla_.rope_params, c.pos0 + i,
                         &rope_[static_cast<size_t>((c.row0 + i) * hp.n_rot)]);
}

void Deepseek2::RunLayer(int32_t li, const Batch& b, KvStore& kv, ThreadPool* pool, float* x) {
  const HParams& hp = hp_;
  const int64_t n = b.n_rows(), E = hp.n_embd;
  float* xn = xn_.data();
  const Layer& L = layers_[static_cast<size_t>(li)];
  for (int64_t r = 0; r < n; ++r)
    kernels::RmsNorm(x + r * E, L.attn_norm.data(), xn + r * E, E, hp.rms_eps);
  if (!split()) {
    RunMla(hp, L.attn, mla_, xn, rope_.data(), b, kv, li, tmp_.data(), pool, &mla_s_);
  } else {
    // [n, my heads x v_mla] -> gathered [n, n_head x v_mla] -> [n, E]
    const float* o = RunMlaHeads(hp, L.attn, mla_, xn, rope_.data(), b, kv, li, pool, &mla_s_);
    Grow(o_all_, n * hp.n_head * hp.head_dim_v_mla);
    Gather(att_g_, o, n, o_all_.data());
    MatMulGather(L.attn.wo, o_all_.data(), n, embd_gather_, tmp_.data(), pool, &ffn_s_.mm);
  }
  for (int64_t r = 0; r < n; ++r) {
    kernels::AddInPlace(x + r * E, tmp_.data() + r * E, E);
    kernels::RmsNorm(x + r * E, L.ffn_norm.data(), xn + r * E, E, hp.rms_eps);
  }
  if (L.moe) {
    Status moe_status;
    const MoeShard shard{comm(), tp_.rank, tp_.size, &moe_status};
    RunMoe(moe_, L.experts, xn, E, xn, E, n, tmp_.data(), pool, &moe_s_, split() ? &shard : nullptr,
           expert_load_[static_cast<size_t>(li)].data());
    if (!moe_status.ok()) FailStep(std::move(moe_status));
    if (L.shared.gate.data) {
      if (split()) {
        SplitFfn(L.shared, GluParams{}, sh_g_, xn, n, sh_.data(), pool, &ffn_s_);
      } else {
        RunDenseFfn(L.shared, GluParams{}, xn, E, n, sh_.data(), E, pool, &ffn_s_);
      }
      kernels::AddInPlace(tmp_.data(), sh_.data(), n * E);  // moe_out + shared
    }
  } else if (split()) {
    SplitFfn(L.dense, GluParams{}, ff_g_, xn, n, tmp_.data(), pool, &ffn_s_);
  } else {
    RunDenseFfn(L.dense, GluParams{}, xn, E, n, tmp_.data(), E, pool, &ffn_s_);
  }
  kernels::AddInPlace(x, tmp_.data(), n * E);
}

std::unique_ptr<Model> NewDeepseek2() { return std::make_unique<Deepseek2>(); }

}  // namespace

const ArchDef kDeepseek2Arch = {"deepseek2", LoadDeepseek2HParams, NewDeepseek2};

}  // namespace shoal
