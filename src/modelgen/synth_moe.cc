// MoE synth presets (qwen3moe, deepseek2, kimi-k3): llama.cpp's tensor names, shapes and keys.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "modelgen/synth.h"

namespace shoal {
namespace {

MoeSynthPreset Qwen3Moe(std::string name, int64_t embd, int64_t layers, int64_t heads,
                        int64_t heads_kv, int64_t hd, int64_t ff, int64_t vocab, int64_t ctx,
                        int64_t experts, int64_t used, int64_t ff_exp) {
  MoeSynthPreset p;
  p.arch = "qwen3moe";
  p.name = std::move(name);
  p.n_embd = embd, p.n_layer = layers, p.n_head = heads, p.n_head_kv = heads_kv, p.head_dim = hd;
  p.n_ff = ff, p.n_vocab = vocab, p.n_ctx = ctx;
  p.n_expert = experts, p.n_expert_used = used, p.n_ff_exp = ff_exp;
  p.rope_freq_base = 1e6f;
  return p;
}

// deepseek2 (Kimi K2 / DeepSeek-V3 layout): sigmoid router with bias, 1 shared expert, YaRN.
MoeSynthPreset Deepseek2(std::string name, int64_t embd, int64_t layers, int64_t heads, int64_t ff,
                         int64_t vocab, int64_t experts, int64_t used, int64_t ff_exp,
                         int64_t q_lora, int64_t kv_lora, int64_t nope, int64_t rope, int64_t v) {
  MoeSynthPreset p;
  p.arch = "deepseek2";
  p.name = std::move(name);
  p.n_embd = embd, p.n_layer = layers, p.n_head = heads, p.n_head_kv = 1, p.n_ff = ff;
  p.n_vocab = vocab, p.n_ctx = 131072;
  p.n_expert = experts, p.n_expert_used = used, p.n_ff_exp = ff_exp, p.n_expert_shared = 1;
  p.n_dense_lead = 1;
  p.q_lora = q_lora, p.kv_lora = kv_lora, p.qk_nope = nope, p.qk_rope = rope, p.v_head = v;
  p.rope_freq_base = 50000.0f;
  return p;
}

// kimi-k3: three KDA layers then one MLA layer, latent MoE, block attention residuals.
MoeSynthPreset KimiK3(std::string name, int64_t embd, int64_t layers, int64_t heads, int64_t ff,
                      int64_t vocab, int64_t experts, int64_t used, int64_t ff_exp, int64_t latent,
                      int64_t kda_hd, int64_t kv_lora, int64_t nope, int64_t rope, int64_t v) {
  MoeSynthPreset p;
  p.arch = "kimi-k3";
  p.name = std::move(name);
  p.n_embd = embd, p.n_layer = layers, p.n_head = heads, p.n_head_kv = 1, p.n_ff = ff;
  p.n_vocab = vocab, p.n_ctx = 4096;
  p.n_expert = experts, p.n_expert_used = used, p.n_ff_exp = ff_exp, p.n_expert_shared = 1;
  p.n_dense_lead = 1;
  p.kv_lora = kv_lora, p.qk_nope = nope, p.qk_rope = rope, p.v_head = v;
  p.kda_head_dim = kda_hd, p.d_conv = 4, p.expert_latent = latent, p.attn_res_block = 3;
  p.mla_period = 4;
  p.rms_eps = 1e-5f;
  return p;
}

bool IsKdaLayer(const MoeSynthPreset& p, int64_t l) {
  return p.arch == "kimi-k3" && (l + 1) % p.mla_period != 0;
}

}  // namespace

const std::vector<MoeSynthPreset>& MoeSynthPresets() {
  // "tiny" = the shapes of ../shared/models/tiny (their goldens come from llama.cpp). "small":
  // 64 experts top-8 so that a decoded token reads ~1/4 of the weights; vocab 32000 (Llama's).
  // "wide" (qwen3moe only): layers larger than a 256 MB node.
  static const std::vector<MoeSynthPreset> kPresets = {
      //       name     embd layers heads kv  hd   ff    vocab  ctx   exp used ff_exp
      Qwen3Moe("tiny", 64, 4, 4, 2, 32, 192, 512, 4096, 8, 2, 64),
      Qwen3Moe("small", 1024, 8, 16, 4, 128, 3072, 32000, 32768, 64, 8, 256),
      // "wide": one layer (128 experts of 2048 x 640, ~290 MB in Q4_0) outgrows a 256 MB node,
      // so it must be split inside the layer (docs/CLUSTER.md, the PS3 test, part two).
      Qwen3Moe("wide", 2048, 4, 16, 4, 128, 6144, 32000, 4096, 128, 8, 640),
      //        name     embd layers heads ff   vocab exp used ff_exp q_lora kv_lora nope rope v
      Deepseek2("tiny", 64, 4, 4, 192, 512, 16, 4, 32, 32, 64, 32, 16, 32),
      Deepseek2("small", 1024, 8, 16, 2816, 32000, 64, 8, 256, 384, 256, 64, 32, 64),
      //     name     embd layers heads ff   vocab exp used ff_exp latent kda_hd kv_lora nope rope v
      KimiK3("tiny", 64, 8, 4, 128, 512, 8, 2, 32, 32, 32, 64, 32, 16, 32),
      KimiK3("small", 1024, 8, 16, 2816, 32000, 64, 8, 512, 512, 64, 256, 64, 32, 64),
  };
  return kPresets;
}

bool IsMoeSynthArch(const std::string& arch) {
  return arch == "qwen3moe" || arch == "deepseek2" || arch == "kimi-k3";
}

Result<MoeSynthPreset> FindMoeSynthPreset(const std::string& arch, const std::string& name) {
  std::string names;
  for (const MoeSynthPreset& p : MoeSynthPresets()) {
    if (p.arch != arch) continue;
    if (p.name == name) return p;
    names += names.empty() ? p.name : ", " + p.name;
  }
  if (names.empty()) return Errorf("synth: no presets for architecture '{}'", arch);
  return Errorf("unknown {} synth preset '{}' (known: {})", arch, name, names);
}

Result<std::vector<SynthTensor>> MoeSynthTensorList(const MoeSynthPreset& p, DType type) {
  SHOAL_RETURN_IF_ERROR(SynthFileType(type).status());
  if (!IsMoeSynthArch(p.arch) || p.n_embd <= 0 || p.n_layer <= 0 || p.n_head <= 0 ||
      p.n_vocab <= 0 || p.n_expert <= 0 || p.n_expert_used <= 0 || p.n_expert_used > p.n_expert ||
      p.n_ff_exp <= 0 || (p.arch == "kimi-k3" && p.mla_period <= 0)) {
    return Errorf("synth preset '{}' ({}): inconsistent shape", p.name, p.arch);
  }
  DType out_type = type;
  if (type == DType::kQ4_0) {
    const bool q6k = p.n_embd % 256 == 0 && kernels::QuantizeSupported(DType::kQ6_K) &&
                     kernels::IsSupportedWeightType(DType::kQ6_K);
    out_type = q6k ? DType::kQ6_K : DType::kQ8_0;
  }
  using Init = SynthTensor::Init;
  const int64_t E = p.n_embd, H = p.n_head;
  std::vector<SynthTensor> t;
  auto global = [&](std::string name, DType dt, std::vector<int64_t> ne, Init init) {
    t.push_back({std::move(name), dt, std::move(ne), init});
  };
  global("token_embd.weight", type, {E, p.n_vocab}, Init::kEmbedding);
  global("output_norm.weight", DType::kF32, {E}, Init::kNorm);
  global("output.weight", out_type, {E, p.n_vocab}, Init::kMatrix);
  if (p.attn_res_block > 0) global("output_res_score.weight", DType::kF32, {E}, Init::kMatrix);

  for (int64_t l = 0; l < p.n_layer; ++l) {
    auto add = [&](const char* name, DType dt, std::vector<int64_t> ne, Init init, float sd = 0) {
      t.push_back({fmt::format("blk.{}.{}", l, name), dt, std::move(ne), init, sd});
    };
    auto mat = [&](const char* name, std::vector<int64_t> ne) {
      add(name, type, std::move(ne), Init::kMatrix);
    };
    auto norm = [&](const char* name, int64_t n) { add(name, DType::kF32, {n}, Init::kNorm); };
    norm("attn_norm.weight", E);
    if (p.arch == "kimi-k3") {
      norm("ffn_norm.weight", E);
      add("attn_res_score.weight", DType::kF32, {E}, Init::kMatrix);
      add("ffn_res_score.weight", DType::kF32, {E}, Init::kMatrix);
    }
    if (p.arch == "qwen3moe") {
      mat("attn_q.weight", {E, H * p.head_dim});
      mat("attn_k.weight", {E, p.n_head_kv * p.head_dim});
      mat("attn_v.weight", {E, p.n_head_kv * p.head_dim});
      norm("attn_q_norm.weight", p.head_dim);
      norm("attn_k_norm.weight", p.head_dim);
      mat("attn_output.weight", {H * p.head_dim, E});
    } else if (IsKdaLayer(p, l)) {
      const int64_t di = H * p.kda_head_dim;
      const char* conv[3] = {"ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight"};
      const char* proj[3] = {"attn_q.weight", "attn_k.weight", "attn_v.weight"};
      for (int i = 0; i < 3; ++i) {
        mat(proj[i], {E, di});
        add(conv[i], DType::kF32, {p.d_conv, 1, di, 1}, Init::kScaled, 0.5f);
      }
      mat("ssm_f_a.weight", {E, p.kda_head_dim});
      mat("ssm_f_b.weight", {p.kda_head_dim, di});
      mat("ssm_beta.weight", {E, H});
      add("ssm_a", DType::kF32, {H}, Init::kNegUniform);
      add("ssm_dt.bias", DType::kF32, {di}, Init::kScaled, 0.5f);
      mat("ssm_g.weight", {E, di});
      norm("ssm_norm.weight", p.kda_head_dim);
      mat("attn_output.weight", {di, E});
    } else {  // MLA (deepseek2, kimi-k3)
      const int64_t qk = p.qk_nope + p.qk_rope;
      if (p.q_lora > 0) {
        mat("attn_q_a.weight", {E, p.q_lora});
        norm("attn_q_a_norm.weight", p.q_lora);
        mat("attn_q_b.weight", {p.q_lora, H * qk});
      } else {
        mat("attn_q.weight", {E, H * qk});
      }
      mat("attn_kv_a_mqa.weight", {E, p.kv_lora + p.qk_rope});
      norm("attn_kv_a_norm.weight", p.kv_lora);
      // attn_k_b maps q_nope into the latent: its fan-in for the init is kv_lora_rank.
      add("attn_k_b.weight", type, {p.qk_nope, p.kv_lora, H}, Init::kScaled,
          1.0f / std::sqrt(static_cast<float>(p.kv_lora)));
      mat("attn_v_b.weight", {p.kv_lora, p.v_head, H});
      mat("attn_output.weight", {H * p.v_head, E});
      if (p.arch == "kimi-k3") mat("attn_gate.weight", {E, H * p.v_head});
    }
    if (p.arch != "kimi-k3") norm("ffn_norm.weight", E);
    if (l < p.n_dense_lead) {
      mat("ffn_gate.weight", {E, p.n_ff});
      mat("ffn_up.weight", {E, p.n_ff});
      mat("ffn_down.weight", {p.n_ff, E});
      continue;
    }
    mat("ffn_gate_inp.weight", {E, p.n_expert});
    t.back().type = DType::kF32;  // the router stays F32 (llama-quantize never touches it)
    if (p.arch != "qwen3moe") {
      add("exp_probs_b.bias", DType::kF32, {p.n_expert}, Init::kScaled, 0.1f);
    }
    int64_t xe = E;  // width the routed experts work in
    if (p.expert_latent > 0) {
      xe = p.expert_latent;
      mat("ffn_routed_down.weight", {E, xe});
      norm("ffn_routed_norm.weight", xe);
      mat("ffn_routed_up.weight", {xe, E});
    }
    mat("ffn_gate_exps.weight", {xe, p.n_ff_exp, p.n_expert});
    mat("ffn_up_exps.weight", {xe, p.n_ff_exp, p.n_expert});
    mat("ffn_down_exps.weight", {p.n_ff_exp, xe, p.n_expert});
    if (p.n_expert_shared > 0) {
      const int64_t fs = p.n_ff_exp * p.n_expert_shared;
      mat("ffn_gate_shexp.weight", {E, fs});
      mat("ffn_up_shexp.weight", {E, fs});
      mat("ffn_down_shexp.weight", {fs, E});
    }
  }
  for (const SynthTensor& x : t) {
    if (x.type != DType::kF32 && x.ne[0] % Info(x.type).block_size != 0) {
      return Errorf("synth preset '{}': {} has rows of {} (not whole {} blocks)", p.name, x.name,
                    x.ne[0], DTypeName(x.type));
    }
  }
  return t;
}

void SetMoeSynthMetadata(const MoeSynthPreset& p, gguf::Writer* w) {
  const std::string a = p.arch + ".";
  auto u32 = [&](const char* key, int64_t v) { w->SetU32(a + key, static_cast<uint32_t>(v)); };
  u32("vocab_size", p.n_vocab);
  u32("context_length", p.n_ctx);
  u32("embedding_length", p.n_embd);
  u32("block_count", p.n_layer);
  u32("feed_forward_length", p.n_ff);
  u32("attention.head_count", p.n_head);
  w->SetF32(a + "attention.layer_norm_rms_epsilon", p.rms_eps);
  if (p.arch == "kimi-k3") {
    std::vector<int32_t> kv(static_cast<size_t>(p.n_layer));
    for (int64_t l = 0; l < p.n_layer; ++l) kv[l] = IsKdaLayer(p, l) ? 0 : 1;
    w->SetI32Array(a + "attention.head_count_kv", kv);
    u32("ssm.conv_kernel", p.d_conv);
    u32("kda.head_dim", p.kda_head_dim);
    w->SetF32(a + "kda.gate_lower_bound", -5.0f);
  } else {
    u32("attention.head_count_kv", p.n_head_kv);
  }
  if (p.arch == "qwen3moe") {
    u32("attention.key_length", p.head_dim);
    u32("attention.value_length", p.head_dim);
    w->SetF32(a + "rope.freq_base", p.rope_freq_base);
    u32("expert_count", p.n_expert);
    u32("expert_used_count", p.n_expert_used);
    u32("expert_feed_forward_length", p.n_ff_exp);
    return;
  }
  if (p.arch == "deepseek2") {
    w->SetF32(a + "rope.freq_base", p.rope_freq_base);
    u32("leading_dense_block_count", p.n_dense_lead);
    u32("attention.q_lora_rank", p.q_lora);
  }
  u32("attention.kv_lora_rank", p.kv_lora);
  u32("attention.key_length", p.kv_lora + p.qk_rope);
  u32("attention.value_length", p.kv_lora);
  u32("attention.key_length_mla", p.qk_nope + p.qk_rope);
  u32("attention.value_length_mla", p.v_head);
  u32("rope.dimension_count", p.qk_rope);
  u32("expert_feed_forward_length", p.n_ff_exp);
  u32("expert_count", p.n_expert);
  u32("expert_used_count", p.n_expert_used);
  u32("expert_shared_count", p.n_expert_shared);
  if (p.arch == "deepseek2") {
    u32("expert_group_count", 1);
    u32("expert_group_used_count", 1);
    w->SetF32(a + "expert_weights_scale", 2.827f);  // Kimi K2 / DeepSeek-V3 routed_scaling_factor
    w->SetBool(a + "expert_weights_norm", true);
    u32("expert_gating_func", 2);  // sigmoid
    w->SetString(a + "rope.scaling.type", "yarn");
    w->SetF32(a + "rope.scaling.factor", 32.0f);
    u32("rope.scaling.original_context_length", 4096);
    w->SetF32(a + "rope.scaling.yarn_log_multiplier", 0.1f);
    return;
  }
  u32("leading_dense_block_count", p.n_dense_lead);
  w->SetF32(a + "expert_weights_scale", 2.5f);
  w->SetBool(a + "expert_weights_norm", true);
  u32("expert_gating_func", 2);
  u32("expert_latent_length", p.expert_latent);
  w->SetF32(a + "activation.situ_beta", 4.0f);
  w->SetF32(a + "activation.situ_linear_beta", 25.0f);
  u32("attn_res.block_size", p.attn_res_block);
}

}  // namespace shoal
