// Model hyper-parameters read from GGUF metadata, common to every architecture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"

namespace shoal {

enum class RopeType { kNone, kNorm, kNeox };

// How router logits become expert probabilities (llama.cpp's expert_gating_func values).
enum class GatingFunc { kSoftmax = 1, kSigmoid = 2 };

struct HParams {
  std::string arch;  // general.architecture
  std::string name;  // general.name
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  std::vector<int64_t> n_head_kv_per_layer;  // when the file gives one per layer (else empty)
  int64_t head_dim_k = 0;                    // per-head key/query width
  int64_t head_dim_v = 0;                    // per-head value width
  int64_t n_ff = 0;
  float rms_eps = 1e-5f;

  // RoPE
  RopeType rope_type = RopeType::kNorm;
  int64_t n_rot = 0;
  float rope_freq_base = 10000.f;
  float rope_freq_scale = 1.f;  // 1 / scaling factor (linear or YaRN)
  bool rope_yarn = false;
  int64_t rope_n_ctx_orig = 0;
  float yarn_log_mul = 0.f;

  // Block options of the dense llama family.
  bool qkv_bias = false;         // qwen2
  bool qk_norm = false;          // qwen3: per-head RMSNorm of q and k before RoPE
  bool tied_embeddings = false;  // no output.weight: logits use token_embd

  // Mixture of experts (n_expert == 0: dense). Keys as llama.cpp names them.
  int64_t n_expert = 0;              // expert_count
  int64_t n_expert_used = 0;         // expert_used_count (top-k)
  int64_t n_ff_exp = 0;              // expert_feed_forward_length (else feed_forward_length)
  int64_t n_expert_shared = 0;       // expert_shared_count (shared experts, FFN n_ff_exp each)
  int64_t n_layer_dense_lead = 0;    // leading_dense_block_count: layers before it are dense
  bool expert_weights_norm = false;  // renormalise the chosen weights to sum 1
  float expert_weights_scale = 0.f;  // multiply the chosen weights (0 or 1: none)
  GatingFunc gating = GatingFunc::kSoftmax;

  // Multi-head latent attention (kv_lora_rank > 0). head_dim_k/v above are then the widths of
  // the absorbed (MQA over the latent) attention: kv_lora_rank + n_rot and kv_lora_rank.
  int64_t q_lora_rank = 0;  // 0: q comes from attn_q directly
  int64_t kv_lora_rank = 0;
  int64_t head_dim_k_mla = 0;  // key_length_mla: per-head q width (nope + rope)
  int64_t head_dim_v_mla = 0;  // value_length_mla: per-head output width after attn_v_b

  // Kimi K3 (Kimi Delta Attention layers where n_head_kv_per_layer is 0, attention residuals).
  int64_t kda_head_dim = 0;
  int64_t ssm_d_conv = 0;
  float kda_gate_lower_bound = 0.f;
  int64_t n_expert_latent = 0;  // expert_latent_length: routed experts run at this width
  float situ_beta = 0.f, situ_linear_beta = 0.f;
  int64_t attn_res_block_size = 0;

  bool is_recurrent_layer(int64_t il) const {
    return !n_head_kv_per_layer.empty() && n_head_kv_per_layer[static_cast<size_t>(il)] == 0;
  }
  bool is_moe_layer(int64_t il) const { return n_expert > 0 && il >= n_layer_dense_lead; }
  // [n_rows, n_embd] planes a pipeline stage starting at `layer` receives: the hidden state,
  // plus (attention residuals) the inputs banked by layers 0, B, 2B, ... below it.
  int32_t hidden_planes(int64_t layer) const {
    const int64_t bs = attn_res_block_size;
    return 1 + (bs > 0 && layer > 0 ? static_cast<int32_t>((layer + bs - 1) / bs) : 0);
  }
  bool is_mla() const { return kv_lora_rank > 0; }

  int64_t q_dim() const { return n_head * head_dim_k; }
  int64_t k_dim() const { return n_head_kv * head_dim_k; }
  int64_t v_dim() const { return n_head_kv * head_dim_v; }
  // Per-token widths of a layer's K and V rows in the KV cache. MLA caches only the latent and
  // the rope part ([c | k_pe], kv_lora_rank + n_rot); its V is a view of K's first kv_lora_rank.
  int64_t cache_k_dim() const { return k_dim(); }
  int64_t cache_v_dim() const { return is_mla() ? 0 : v_dim(); }
};

// Reads the keys every llama-family architecture shares ("<arch>.embedding_length", ...).
// Architecture files then adjust what differs.
Status ReadCommonHParams(const gguf::File& f, HParams* hp);
// Reads the mixture-of-experts keys (expert_count, ...); a file without them stays dense.
Status ReadMoeHParams(const gguf::File& f, HParams* hp);
// Reads the MLA keys (q_lora_rank, kv_lora_rank, key/value_length_mla) and checks the widths.
Status ReadMlaHParams(const gguf::File& f, HParams* hp);

// One line per field, for `shoal info`.
std::string DescribeHParams(const HParams& hp);

}  // namespace shoal
