// Architecture "kimi-k3": its hyper-parameter rules (KDA layers where head_count_kv is 0) and its
// layer (llama.cpp's models/kimi-k3.cpp): res_mix -> norm -> KDA | MLA -> (banked ? a : x + a)
// -> res_mix -> norm -> situ FFN | latent MoE -> + ; the head reads res_mix(x, output_res_score).
// A tensor-parallel member (model/tensor_parallel.h) holds a slice of the KDA and MLA heads (and
// of the KDA states), of the FFN columns, of the latent width, of the experts and of the output
// rows, and gathers them; the residual mixing runs whole on every member.
#include "model/arch/kimi_k3/kimi_k3.h"

#include <fmt/format.h>

#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/kda.h"
#include "model/mla_attention.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/weights.h"

namespace shoal {
namespace {

// Hyper-parameters after ReadCommonHParams.
Status LoadKimiK3HParams(const gguf::File& f, HParams* hp) {
  const std::string a = "kimi-k3.";
  hp->rope_type = RopeType::kNone;
  if (hp->n_head_kv_per_layer.empty())
    return Errorf("{}: kimi-k3 needs a per-layer head_count_kv array", f.path());
  hp->n_head_kv = 1;  // the MLA layers: MQA over the latent
  SHOAL_RETURN_IF_ERROR(ReadMlaHParams(f, hp));
  SHOAL_RETURN_IF_ERROR(ReadMoeHParams(f, hp));
  hp->kda_head_dim = static_cast<int64_t>(f.GetUintOr(a + "kda.head_dim", 0));
  hp->ssm_d_conv = static_cast<int64_t>(f.GetUintOr(a + "ssm.conv_kernel", 0));
  if (hp->kda_head_dim <= 0 || hp->kda_head_dim > 256 || hp->ssm_d_conv < 1 || hp->ssm_d_conv > 16)
    return Errorf("{}: kda.head_dim {} / ssm.conv_kernel {} invalid", f.path(), hp->kda_head_dim,
                  hp->ssm_d_conv);
  if (!f.Find(a + "kda.gate_lower_bound"))
    return Errorf(
        "{}: kimi-k3 without kda.gate_lower_bound (Kimi-Linear softplus gate) is not "
        "supported",
        f.path());
  hp->kda_gate_lower_bound = static_cast<float>(f.GetFloatOr(a + "kda.gate_lower_bound", 0));
  hp->n_expert_latent = static_cast<int64_t>(f.GetUintOr(a + "expert_latent_length", 0));
  hp->situ_beta = static_cast<float>(f.GetFloatOr(a + "activation.situ_beta", 0));
  hp->situ_linear_beta = static_cast<float>(f.GetFloatOr(a + "activation.situ_linear_beta", 0));
  if (hp->situ_beta <= 0) return Errorf("{}: activation.situ_beta missing", f.path());
  hp->attn_res_block_size = static_cast<int64_t>(f.GetUintOr(a + "attn_res.block_size", 0));
  if (hp->n_expert == 0) return Errorf("{}: kimi-k3 without expert_count", f.path());
  return Status::Ok();
}

using kernels::MatrixView;

struct Layer {
  std::vector<float> attn_norm, ffn_norm, attn_res, ffn_res;  // [n_embd]
  bool recurrent = false;
  int64_t kda_index = 0;  // recurrent layers: which KdaState of the sequence's slot
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
  // One KdaState per KDA layer of the range (this member's heads), in layer order, in the
  // sequence's state slot.
  int64_t StateFloatsPerSeq() const override { return n_kda_ * KdaState::Floats(hp_, qh_.count); }

 private:
  Status LoadLayers(const gguf::File& f, const LoadOptions& opt) override;
  void BeginStep(const Batch& b) override;
  void RunLayer(int32_t li, const Batch& b, KvStore& kv, ThreadPool* pool, float* x) override;
  // The head reads res_mix(x, output_res_score).
  const float* HeadInput(const float* x, int64_t n) override;
  bool SupportsTensorParallel() const override { return true; }
  // tmp_ [n, E] = the attention of layer L (KDA or MLA) over xn_.
  void Attention(const Layer& L, const Batch& b, KvStore& kv, int32_t li, ThreadPool* pool);
  // out [n, E] = a dense FFN over xn (split or whole).
  void Ffn(const DenseFfn& f, ColumnGather& g, const float* xn, int64_t n, float* out,
           ThreadPool* pool);

  // out[n, E] = sum_j p_j banked_j + p_cur cur with p = softmax over the banked rows (the
  // carried planes) and cur of sum(rmsnorm(.) * w); identity while nothing is banked.
  void ResMix(const float* cur, const std::vector<float>& w, int64_t n, float* out);
  void LatentMoe(const Layer& L, const float* xn, int64_t n, float* out, ThreadPool* pool);

  // A split member's heads (all when not split), and the gathers of its slices.
  Slice qh_;
  ColumnGather kda_g_, mla_g_, ff_g_, sh_g_, lat_g_;
  std::vector<float> o_all_;

  MlaOptions mla_;
  MoeConfig moe_;
  GluParams situ_;
  std::vector<float> output_res_;
  std::vector<Layer> layers_;
  int64_t n_kda_ = 0;                  // KDA layers in [first, last)
  std::vector<KdaState> kda_views_;    // [chunk] this layer's state of the chunk's sequence
  std::vector<KdaState*> kda_states_;  // [chunk] &kda_views_[chunk]
  std::vector<float> h_, xn_, tmp_, lat_, lat2_, sh_, scores_;
  MlaScratch mla_s_;
  KdaScratch kda_s_;
  MoeScratch moe_s_;
  FfnScratch ffn_s_;
  kernels::MatMulScratch mm_;
};

Status KimiK3::LoadLayers(const gguf::File& f, const LoadOptions& opt) {
  // A later stage gets the banked attention-residual inputs with the hidden state
  // (HiddenPlanes); the KDA states of this range's layers live in this stage's state slots.
  const HParams& hp = hp_;
  const int64_t E = hp.n_embd;
  const int64_t lat = hp.n_expert_latent > 0 ? hp.n_expert_latent : E;
  const int T = tp_.size, r = tp_.rank;
  const int64_t sh_ff = hp.n_ff_exp * std::max<int64_t>(hp.n_expert_shared, 1);
  qh_ = SliceOf(hp.n_head, T, r);
  kda_g_.SetCols(SliceWidths(hp.n_head, T, hp.kda_head_dim), r);
  mla_g_.SetCols(SliceWidths(hp.n_head, T, hp.head_dim_v_mla), r);
  ff_g_.SetCols(SliceWidths(hp.n_ff, T), r);
  sh_g_.SetCols(SliceWidths(sh_ff, T), r);
  lat_g_.SetCols(SliceWidths(lat, T), r);
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
    L.kda_index = n_kda_;
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
        SHOAL_ASSIGN_OR_RETURN(L.shared, LoadDenseFfn(f, n("ffn_"), "_shexp.weight", E, sh_ff));
      }
    } else {
      SHOAL_ASSIGN_OR_RETURN(L.dense, LoadDenseFfn(f, n("ffn_"), ".weight", E, hp.n_ff));
    }
    expert_load_.emplace_back(L.moe ? static_cast<size_t>(hp.n_expert) : 0, 0);
    if (split()) {
      if (L.recurrent) L.kda = SliceKdaHeads(L.kda, hp, qh_, embd_rows_);
      if (!L.recurrent) L.mla = SliceMlaHeads(L.mla, hp, qh_, embd_rows_);
      if (L.routed_down.data) L.routed_down = RowSlice(L.routed_down, SliceOf(lat, T, r));
      if (L.routed_up.data) L.routed_up = RowSlice(L.routed_up, embd_rows_);
      if (L.shared.gate.data) L.shared = SliceFfn(L.shared, SliceOf(sh_ff, T, r));
      if (!L.moe) L.dense = SliceFfn(L.dense, SliceOf(hp.n_ff, T, r));
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
  if (n_carried() == 0 || w.empty()) {
    std::copy(cur, cur + n * E, out);
    return;
  }
  const int nb = n_carried();
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
    for (int j = 0; j < nb; ++j) sc[j] = score(carried(j) + r * E);
    sc[nb] = score(cur + r * E);
    kernels::Softmax(sc, nb + 1);
    float* o = out + r * E;
    for (int64_t i = 0; i < E; ++i) o[i] = carried(0)[r * E + i] * sc[0];
    for (int j = 1; j < nb; ++j)
      for (int64_t i = 0; i < E; ++i) o[i] += carried(j)[r * E + i] * sc[j];
    for (int64_t i = 0; i < E; ++i) o[i] += cur[r * E + i] * sc[nb];
  }
}

void KimiK3::LatentMoe(const Layer& L, const float* xn, int64_t n, float* out, ThreadPool* pool) {
  // [n, E] -> (routed_down, gathered) latent [n, lat] -> experts (this member's, gathered in
  // RunMoe) -> routed norm -> (routed_up, gathered) [n, E], plus the shared experts.
  const int64_t E = hp_.n_embd;
  const float* z = xn;
  int64_t lat = E;
  if (L.routed_down.data) {
    lat = split() ? lat_g_.total() : L.routed_down.rows;
    Grow(lat_, n * lat);
    MatMulGather(L.routed_down, xn, n, lat_g_, lat_.data(), pool, &mm_);
    z = lat_.data();
  }
  // Router on the full-width input, experts on the latent one.
  Grow(lat2_, n * lat);
  Status moe_status;
  const MoeShard shard{comm(), tp_.rank, tp_.size, &moe_status};
  const size_t li = static_cast<size_t>(&L - layers_.data());
  RunMoe(moe_, L.experts, xn, E, z, lat, n, lat2_.data(), pool, &moe_s_, split() ? &shard : nullptr,
         expert_load_[li].data());
  if (!moe_status.ok()) FailStep(std::move(moe_status));
  if (!L.routed_norm.empty())
    for (int64_t r = 0; r < n; ++r)
      kernels::RmsNorm(lat2_.data() + r * lat, L.routed_norm.data(), lat2_.data() + r * lat, lat,
                       hp_.rms_eps);
  if (L.routed_up.data) {
    MatMulGather(L.routed_up, lat2_.data(), n, embd_gather_, out, pool, &mm_);
  } else {
    std::copy(lat2_.data(), lat2_.data() + n * E, out);
  }
  if (L.shared.gate.data) {
    Grow(sh_, n * E);
    Ffn(L.shared, sh_g_, xn, n, sh_.data(), pool);
    kernels::AddInPlace(out, sh_.data(), n * E);
  }
}

void KimiK3::Ffn(const DenseFfn& f, ColumnGather& g, const float* xn, int64_t n, float* out,
                 ThreadPool* pool) {
  if (split()) {
    SplitFfn(f, situ_, g, xn, n, out, pool, &ffn_s_);
  } else {
    RunDenseFfn(f, situ_, xn, hp_.n_embd, n, out, hp_.n_embd, pool, &ffn_s_);
  }
}

void KimiK3::Attention(const Layer& L, const Batch& b, KvStore& kv, int32_t li, ThreadPool* pool) {
  const HParams& hp = hp_;
  const int64_t n = b.n_rows();
  if (L.recurrent) {
    const int64_t per_layer = KdaState::Floats(hp, qh_.count);
    for (size_t ci = 0; ci < b.chunks.size(); ++ci) {
      kda_views_[ci] = KdaState::At(hp, qh_.count, chunk_state(ci) + L.kda_index * per_layer);
      kda_states_[ci] = &kda_views_[ci];
    }
    if (!split()) {
      RunKda(hp, L.kda, xn_.data(), b, kda_states_, tmp_.data(), pool, &kda_s_);
      return;
    }
    // [n, my heads x head_dim] -> gathered [n, n_head x head_dim] -> [n, E]
    const float* o = RunKdaHeads(hp, L.kda, xn_.data(), b, kda_states_, pool, &kda_s_);
    Grow(o_all_, n * kda_g_.total());
    Gather(kda_g_, o, n, o_all_.data());
    MatMulGather(L.kda.wo, o_all_.data(), n, embd_gather_, tmp_.data(), pool, &mm_);
    return;
  }
  if (!split()) {
    RunMla(hp, L.mla, mla_, xn_.data(), nullptr, b, kv, li, tmp_.data(), pool, &mla_s_);
    return;
  }
  const float* o = RunMlaHeads(hp, L.mla, mla_, xn_.data(), nullptr, b, kv, li, pool, &mla_s_);
  Grow(o_all_, n * mla_g_.total());
  Gather(mla_g_, o, n, o_all_.data());
  MatMulGather(L.mla.wo, o_all_.data(), n, embd_gather_, tmp_.data(), pool, &mm_);
}

void KimiK3::BeginStep(const Batch& b) {
  const int64_t n = b.n_rows(), E = hp_.n_embd;
  Grow(h_, n * E);
  Grow(xn_, n * E);
  Grow(tmp_, n * E);
  kda_views_.resize(b.chunks.size());
  kda_states_.resize(b.chunks.size());
}

void KimiK3::RunLayer(int32_t li, const Batch& b, KvStore& kv, ThreadPool* pool, float* x) {
  const HParams& hp = hp_;
  const int64_t n = b.n_rows(), E = hp.n_embd;
  const Layer& L = layers_[static_cast<size_t>(li)];
  const int il = first_ + li;
  ResMix(x, L.attn_res, n, h_.data());
  // The first layer of each block banks its input; its attention output then replaces x.
  const bool banked = hp.attn_res_block_size > 0 && il % hp.attn_res_block_size == 0;
  if (banked) Carry(x, n);
  for (int64_t r = 0; r < n; ++r)
    kernels::RmsNorm(h_.data() + r * E, L.attn_norm.data(), xn_.data() + r * E, E, hp.rms_eps);
  Attention(L, b, kv, li, pool);
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
    Ffn(L.dense, ff_g_, xn_.data(), n, tmp_.data(), pool);
  }
  kernels::AddInPlace(x, tmp_.data(), n * E);
}

const float* KimiK3::HeadInput(const float* x, int64_t n) {
  ResMix(x, output_res_, n, h_.data());
  return h_.data();
}

std::unique_ptr<Model> NewKimiK3() { return std::make_unique<KimiK3>(); }

}  // namespace

const ArchDef kKimiK3Arch = {"kimi-k3", LoadKimiK3HParams, NewKimiK3};

}  // namespace shoal
