// Model hyper-parameters read from GGUF metadata, common to every architecture.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf.h"

namespace shoal {

enum class RopeType { kNone, kNorm, kNeox };

struct HParams {
  std::string arch;  // general.architecture
  std::string name;  // general.name
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;  // per-head key/query width
  int64_t head_dim_v = 0;  // per-head value width
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

  int64_t q_dim() const { return n_head * head_dim_k; }
  int64_t k_dim() const { return n_head_kv * head_dim_k; }
  int64_t v_dim() const { return n_head_kv * head_dim_v; }
};

// Reads the keys every llama-family architecture shares ("<arch>.embedding_length", ...).
// Architecture files then adjust what differs.
Status ReadCommonHParams(const gguf::File& f, HParams* hp);

// One line per field, for `shoal info`.
std::string DescribeHParams(const HParams& hp);

}  // namespace shoal
