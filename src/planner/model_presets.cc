// Model presets: published hyper-parameters (HF config.json of each model, docs/SCALE.md) as a
// planner tensor table (GGUF names and ggml shapes, the way llama.cpp converts them).
#include <optional>

#include "planner/presets.h"

namespace shoal::planner {
namespace {

enum class Mix { kGqa, kMla, kKda };

struct Shape {
  std::string name, arch;
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 128, n_ff = 0;
  int64_t n_vocab = 0, n_ctx = 0;
  bool tied = false;
  // MLA (DeepSeek-V3 layout).
  int64_t q_lora = 0, kv_lora = 0, qk_nope = 128, qk_rope = 64, v_head = 128;
  // MoE: layers [0, first_dense) are dense (n_ff), the rest MoE.
  int64_t n_expert = 0, n_expert_used = 0, n_shared = 0, moe_ff = 0, shared_ff = 0;
  int64_t first_dense = 0;
  // KDA (Kimi Delta Attention): heads x head_dim state per layer, short conv kernel.
  int64_t kda_heads = 0, kda_head_dim = 128, kda_conv = 4;
  // Layer l is MLA when (l + 1) % mla_every == 0 or l is the last layer, KDA otherwise; 0 =
  // every layer uses the model's attention (MLA when kv_lora > 0, else GQA).
  int64_t mla_every = 0;
  bool experts_mxfp4 = false;  // routed experts stored in MXFP4 whatever the other matrices
};

class Builder {
 public:
  Builder(DType mat, DType exps) : mat_(mat), exps_(exps) {}
  Status Add(const std::string& name, DType t, std::vector<int64_t> ne) {
    SHOAL_ASSIGN_OR_RETURN(TensorEntry e, TensorEntry::FromShape(name, t, ne));
    out.push_back(std::move(e));
    return Status::Ok();
  }
  Status Mat(const std::string& n, int64_t in, int64_t out_dim) {
    return Add(n + ".weight", mat_, {in, out_dim});
  }
  Status Vec(const std::string& n, int64_t d) { return Add(n + ".weight", DType::kF32, {d}); }
  Status Exps(const std::string& n, int64_t in, int64_t out_dim, int64_t n_exp) {
    return Add(n + ".weight", exps_, {in, out_dim, n_exp});
  }
  std::vector<TensorEntry> out;

 private:
  DType mat_, exps_;
};

Status AddGqa(Builder& b, const std::string& p, const Shape& s) {
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_q", s.n_embd, s.n_head * s.head_dim));
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_k", s.n_embd, s.n_head_kv * s.head_dim));
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_v", s.n_embd, s.n_head_kv * s.head_dim));
  return b.Mat(p + "attn_output", s.n_head * s.head_dim, s.n_embd);
}

Status AddMla(Builder& b, const std::string& p, const Shape& s) {
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_q_a", s.n_embd, s.q_lora));
  SHOAL_RETURN_IF_ERROR(b.Vec(p + "attn_q_a_norm", s.q_lora));
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_q_b", s.q_lora, s.n_head * (s.qk_nope + s.qk_rope)));
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_kv_a_mqa", s.n_embd, s.kv_lora + s.qk_rope));
  SHOAL_RETURN_IF_ERROR(b.Vec(p + "attn_kv_a_norm", s.kv_lora));
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_kv_b", s.kv_lora, s.n_head * (s.qk_nope + s.v_head)));
  return b.Mat(p + "attn_output", s.n_head * s.v_head, s.n_embd);
}

// Kimi Linear's KDA block: q, k, v projections with short convolutions, low-rank forget gate
// (f_a, f_b) and output gate (g_a, g_b) of rank head_dim, beta per head, output projection.
Status AddKda(Builder& b, const std::string& p, const Shape& s) {
  const int64_t d = s.kda_heads * s.kda_head_dim;
  for (const char* n : {"attn_q", "attn_k", "attn_v"}) {
    SHOAL_RETURN_IF_ERROR(b.Mat(p + n, s.n_embd, d));
    SHOAL_RETURN_IF_ERROR(b.Add(p + n + "_conv.weight", DType::kF32, {s.kda_conv, d}));
  }
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_f_a", s.n_embd, s.kda_head_dim));
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_f_b", s.kda_head_dim, d));
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_g_a", s.n_embd, s.kda_head_dim));
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_g_b", s.kda_head_dim, d));
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "attn_beta", s.n_embd, s.kda_heads));
  SHOAL_RETURN_IF_ERROR(b.Vec(p + "attn_o_norm", s.kda_head_dim));
  return b.Mat(p + "attn_output", d, s.n_embd);
}

Status AddFfn(Builder& b, const std::string& p, const Shape& s, bool moe) {
  if (!moe) {
    SHOAL_RETURN_IF_ERROR(b.Mat(p + "ffn_gate", s.n_embd, s.n_ff));
    SHOAL_RETURN_IF_ERROR(b.Mat(p + "ffn_up", s.n_embd, s.n_ff));
    return b.Mat(p + "ffn_down", s.n_ff, s.n_embd);
  }
  SHOAL_RETURN_IF_ERROR(b.Add(p + "ffn_gate_inp.weight", DType::kF32, {s.n_embd, s.n_expert}));
  SHOAL_RETURN_IF_ERROR(b.Exps(p + "ffn_gate_exps", s.n_embd, s.moe_ff, s.n_expert));
  SHOAL_RETURN_IF_ERROR(b.Exps(p + "ffn_up_exps", s.n_embd, s.moe_ff, s.n_expert));
  SHOAL_RETURN_IF_ERROR(b.Exps(p + "ffn_down_exps", s.moe_ff, s.n_embd, s.n_expert));
  if (s.n_shared == 0) return Status::Ok();
  const int64_t sf = s.shared_ff * s.n_shared;
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "ffn_gate_shexp", s.n_embd, sf));
  SHOAL_RETURN_IF_ERROR(b.Mat(p + "ffn_up_shexp", s.n_embd, sf));
  return b.Mat(p + "ffn_down_shexp", sf, s.n_embd);
}

Mix LayerMix(const Shape& s, int64_t l) {
  if (s.mla_every > 0)
    return ((l + 1) % s.mla_every == 0 || l == s.n_layer - 1) ? Mix::kMla : Mix::kKda;
  return s.kv_lora > 0 ? Mix::kMla : Mix::kGqa;
}

LayerAttn AttnOf(const Shape& s, Mix m) {
  LayerAttn a;
  switch (m) {
    case Mix::kGqa:
      a.kind = AttnKind::kGqa;
      a.kv_width = 2 * s.n_head_kv * s.head_dim;
      a.flops_per_ctx = 2.0 * static_cast<double>(s.n_head * 2 * s.head_dim);
      break;
    case Mix::kMla:
      // Cache: the kv latent and the shared rope key; absorbed attention scores lora + rope
      // elements and sums lora elements per head (DeepSeek-V2 paper, section 2.1.3).
      a.kind = AttnKind::kMla;
      a.kv_width = s.kv_lora + s.qk_rope;
      a.flops_per_ctx = 2.0 * static_cast<double>(s.n_head * (2 * s.kv_lora + s.qk_rope));
      break;
    case Mix::kKda: {
      // State: one head_dim x head_dim f32 matrix per head, plus (conv - 1) past inputs of q, k
      // and v for the short convolutions (f32). Per token ~8 flops per state element (decay,
      // k^T S, rank-1 update, q readout: Kimi Linear's recurrent form).
      a.kind = AttnKind::kKda;
      const uint64_t d = static_cast<uint64_t>(s.kda_heads * s.kda_head_dim);
      a.state_bytes = static_cast<uint64_t>(s.kda_heads * s.kda_head_dim * s.kda_head_dim) * 4 +
                      static_cast<uint64_t>(s.kda_conv - 1) * 3 * d * 4;
      a.flops_fixed = 8.0 * static_cast<double>(s.kda_heads * s.kda_head_dim * s.kda_head_dim);
      break;
    }
  }
  return a;
}

Result<ModelProfile> Build(const Shape& s, DType mat, DType exps) {
  Builder b(mat, exps);
  SHOAL_RETURN_IF_ERROR(b.Mat("token_embd", s.n_embd, s.n_vocab));
  std::vector<LayerAttn> attn;
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    SHOAL_RETURN_IF_ERROR(b.Vec(p + "attn_norm", s.n_embd));
    const Mix m = LayerMix(s, l);
    if (m == Mix::kGqa) SHOAL_RETURN_IF_ERROR(AddGqa(b, p, s));
    if (m == Mix::kMla) SHOAL_RETURN_IF_ERROR(AddMla(b, p, s));
    if (m == Mix::kKda) SHOAL_RETURN_IF_ERROR(AddKda(b, p, s));
    SHOAL_RETURN_IF_ERROR(b.Vec(p + "ffn_norm", s.n_embd));
    SHOAL_RETURN_IF_ERROR(AddFfn(b, p, s, s.n_expert > 0 && l >= s.first_dense));
    attn.push_back(AttnOf(s, m));
  }
  SHOAL_RETURN_IF_ERROR(b.Vec("output_norm", s.n_embd));
  if (!s.tied) SHOAL_RETURN_IF_ERROR(b.Mat("output", s.n_embd, s.n_vocab));
  HParams hp;
  hp.arch = s.arch;
  hp.name = s.name;
  hp.n_vocab = s.n_vocab;
  hp.n_ctx_train = s.n_ctx;
  hp.n_embd = s.n_embd;
  hp.n_layer = s.n_layer;
  hp.n_head = s.n_head;
  hp.n_head_kv = s.n_head_kv > 0 ? s.n_head_kv : s.n_head;
  hp.head_dim_k = s.kv_lora > 0 ? s.qk_nope + s.qk_rope : s.head_dim;
  hp.head_dim_v = s.kv_lora > 0 ? s.v_head : s.head_dim;
  hp.n_ff = s.n_ff;
  hp.n_rot = s.kv_lora > 0 ? s.qk_rope : s.head_dim;
  hp.tied_embeddings = s.tied;
  SHOAL_ASSIGN_OR_RETURN(ModelProfile p, ProfileFromTensors(hp, b.out));
  p.moe = {s.n_expert, s.n_expert_used, s.n_shared};
  p.attn = std::move(attn);
  return p;
}

Shape Llama(std::string name, int64_t embd, int64_t layers, int64_t heads, int64_t ff) {
  Shape s;
  s.name = std::move(name);
  s.arch = "llama";
  s.n_embd = embd;
  s.n_layer = layers;
  s.n_head = heads;
  s.n_head_kv = 8;  // every Llama 3.1 size uses 8 KV heads
  s.n_ff = ff;
  s.n_vocab = 128256;
  s.n_ctx = 131072;
  return s;
}

// DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json): 671B total, 37B active.
Shape DeepSeekV3() {
  Shape s;
  s.name = "deepseek-v3";
  s.arch = "deepseek2";
  s.n_embd = 7168;
  s.n_layer = 61;
  s.n_head = 128;
  s.n_ff = 18432;
  s.n_vocab = 129280;
  s.n_ctx = 163840;
  s.q_lora = 1536;
  s.kv_lora = 512;
  s.n_expert = 256;
  s.n_expert_used = 8;
  s.n_shared = 1;
  s.moe_ff = s.shared_ff = 2048;
  s.first_dense = 3;
  return s;
}

// Kimi K2 (moonshotai/Kimi-K2-Instruct config.json): DeepSeek-V3's architecture with 384
// experts, 64 heads and one dense layer; 1.04T total, 32B active.
Shape KimiK2() {
  Shape s = DeepSeekV3();
  s.name = "kimi-k2";
  s.n_head = 64;
  s.n_vocab = 163840;
  s.n_ctx = 131072;
  s.n_expert = 384;
  s.first_dense = 1;
  return s;
}

// Kimi K3 as issue #8 states it: 2.8T total / 104B active, 93 layers (69 KDA + 24 MLA), 896
// routed experts with 16 active, routed experts in MXFP4. The widths are not published; these
// are K2's (7168, 64 heads, MLA ranks) and Kimi Linear's KDA (128-dim heads, conv 4, 3 KDA per
// MLA), with routed experts of 1536 and two shared experts of 8192 chosen so that the totals
// come out at 2.77T / 103B.
Shape KimiK3() {
  Shape s = KimiK2();
  s.name = "kimi-k3";
  s.n_layer = 93;
  s.n_expert = 896;
  s.n_expert_used = 16;
  s.moe_ff = 1536;
  s.n_shared = 2;
  s.shared_ff = 8192;
  s.kda_heads = 64;
  s.mla_every = 4;
  s.n_ctx = 262144;
  s.experts_mxfp4 = true;
  return s;
}

std::optional<Shape> FindShape(std::string_view name) {
  if (name == "llama-3.1-8b") return Llama("llama-3.1-8b", 4096, 32, 32, 14336);
  if (name == "llama-3.1-70b") return Llama("llama-3.1-70b", 8192, 80, 64, 28672);
  if (name == "llama-3.1-405b") return Llama("llama-3.1-405b", 16384, 126, 128, 53248);
  if (name == "deepseek-v3") return DeepSeekV3();
  if (name == "kimi-k2") return KimiK2();
  if (name == "kimi-k3") return KimiK3();
  return std::nullopt;
}

}  // namespace

std::vector<std::string_view> ModelPresetNames() {
  return {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "deepseek-v3", "kimi-k2", "kimi-k3"};
}

Result<ModelProfile> ModelPresetProfile(std::string_view name, std::optional<DType> type) {
  std::optional<Shape> s = FindShape(name);
  if (!s) {
    std::string known;
    for (auto n : ModelPresetNames()) known += (known.empty() ? "" : ", ") + std::string(n);
    return Errorf("unknown model '{}' (presets: {}, or a .gguf file)", name, known);
  }
  const DType mat = type.value_or(DType::kQ4_0);
  const DType exps = type ? *type : (s->experts_mxfp4 ? DType::kMXFP4 : mat);
  return Build(*s, mat, exps);
}

}  // namespace shoal::planner
