// Common hyper-parameter reading and validation.
#include "model/hparams.h"

#include <fmt/format.h>

#include <algorithm>

namespace shoal {

namespace {
Result<int64_t> ReadPositive(const gguf::File& f, const std::string& key) {
  const gguf::Value* v = f.Find(key);
  if (!v) return Errorf("{}: missing metadata key '{}'", f.path(), key);
  // Some files store per-layer arrays (e.g. feed_forward_length); use the first element.
  const gguf::Value* s = v;
  if (v->type == gguf::ValueType::kArray) {
    if (v->arr.empty()) return Errorf("{}: '{}' is an empty array", f.path(), key);
    s = &v->arr[0];
  }
  if (!s->IsInteger()) return Errorf("{}: '{}' is not an integer", f.path(), key);
  const int64_t x = s->AsInt();
  if (x <= 0 || x > (int64_t{1} << 31))
    return Errorf("{}: '{}' = {} is out of range", f.path(), key, x);
  return x;
}
}  // namespace

Status ReadCommonHParams(const gguf::File& f, HParams* hp) {
  SHOAL_ASSIGN_OR_RETURN(hp->arch, f.GetString("general.architecture"));
  const std::string a = hp->arch + ".";
  hp->name = f.GetStringOr("general.name", "");
  SHOAL_ASSIGN_OR_RETURN(hp->n_embd, ReadPositive(f, a + "embedding_length"));
  SHOAL_ASSIGN_OR_RETURN(hp->n_layer, ReadPositive(f, a + "block_count"));
  SHOAL_ASSIGN_OR_RETURN(hp->n_head, ReadPositive(f, a + "attention.head_count"));
  SHOAL_ASSIGN_OR_RETURN(hp->n_ff, ReadPositive(f, a + "feed_forward_length"));
  hp->n_ctx_train = static_cast<int64_t>(f.GetUintOr(a + "context_length", 2048));
  hp->n_head_kv = f.Find(a + "attention.head_count_kv") ? 0 : hp->n_head;
  const gguf::Value* kvh = f.Find(a + "attention.head_count_kv");
  if (kvh && kvh->type == gguf::ValueType::kArray) {
    // Per-layer counts (hybrid models: 0 marks a recurrent layer); n_head_kv is the largest.
    if (static_cast<int64_t>(kvh->arr.size()) != hp->n_layer)
      return Errorf("{}: head_count_kv has {} entries for {} layers", f.path(), kvh->arr.size(),
                    hp->n_layer);
    for (const gguf::Value& e : kvh->arr) {
      if (!e.IsInteger() || e.AsInt() < 0 || e.AsInt() > hp->n_head)
        return Errorf("{}: bad head_count_kv entry", f.path());
      hp->n_head_kv_per_layer.push_back(e.AsInt());
      hp->n_head_kv = std::max(hp->n_head_kv, e.AsInt());
    }
    if (hp->n_head_kv == 0) return Errorf("{}: head_count_kv is 0 in every layer", f.path());
  } else if (hp->n_head_kv == 0) {
    SHOAL_ASSIGN_OR_RETURN(hp->n_head_kv, ReadPositive(f, a + "attention.head_count_kv"));
  }
  if (hp->n_head % hp->n_head_kv != 0)
    return Errorf("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), hp->n_head,
                  hp->n_head_kv);
  const int64_t default_hd = hp->n_embd / hp->n_head;
  hp->head_dim_k = static_cast<int64_t>(f.GetUintOr(a + "attention.key_length", default_hd));
  hp->head_dim_v = static_cast<int64_t>(f.GetUintOr(a + "attention.value_length", default_hd));
  hp->n_rot = static_cast<int64_t>(f.GetUintOr(a + "rope.dimension_count", hp->head_dim_k));
  if (hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim_k)
    return Errorf("{}: rope.dimension_count {} invalid for head dim {}", f.path(), hp->n_rot,
                  hp->head_dim_k);
  hp->rms_eps = static_cast<float>(f.GetFloatOr(a + "attention.layer_norm_rms_epsilon", 1e-5));
  hp->rope_freq_base = static_cast<float>(f.GetFloatOr(a + "rope.freq_base", 10000.0));
  // Scaling: "rope.scaling.factor" (or the older "rope.scale_linear") gives freq_scale = 1/f.
  double factor = f.GetFloatOr(a + "rope.scaling.factor", 0.0);
  if (factor == 0.0) factor = f.GetFloatOr(a + "rope.scale_linear", 0.0);
  const std::string scaling =
      f.GetStringOr(a + "rope.scaling.type", factor > 0 ? "linear" : "none");
  if (scaling != "none" && factor > 0) hp->rope_freq_scale = static_cast<float>(1.0 / factor);
  hp->rope_yarn = scaling == "yarn";
  hp->rope_n_ctx_orig = static_cast<int64_t>(
      f.GetUintOr(a + "rope.scaling.original_context_length", hp->n_ctx_train));
  hp->yarn_log_mul = static_cast<float>(f.GetFloatOr(a + "rope.scaling.yarn_log_multiplier", 0.0));

  // Vocabulary size: explicit key, else the tokenizer's token list, else token_embd's rows.
  hp->n_vocab = static_cast<int64_t>(f.GetUintOr(a + "vocab_size", 0));
  if (hp->n_vocab == 0) {
    if (const gguf::Value* t = f.Find("tokenizer.ggml.tokens"))
      hp->n_vocab = static_cast<int64_t>(t->arr.size());
  }
  if (const gguf::TensorInfo* emb = f.FindTensor("token_embd.weight")) {
    if (hp->n_vocab == 0) hp->n_vocab = emb->ne[1];
    if (emb->ne[0] != hp->n_embd || emb->ne[1] != hp->n_vocab)
      return Errorf("{}: token_embd.weight is [{}, {}], expected [{}, {}]", f.path(), emb->ne[0],
                    emb->ne[1], hp->n_embd, hp->n_vocab);
  }
  if (hp->n_vocab <= 0) return Errorf("{}: cannot determine the vocabulary size", f.path());
  hp->tied_embeddings = f.FindTensor("output.weight") == nullptr;
  return Status::Ok();
}

Status ReadMoeHParams(const gguf::File& f, HParams* hp) {
  const std::string a = hp->arch + ".";
  hp->n_expert = static_cast<int64_t>(f.GetUintOr(a + "expert_count", 0));
  if (hp->n_expert == 0) return Status::Ok();
  SHOAL_ASSIGN_OR_RETURN(hp->n_expert_used, ReadPositive(f, a + "expert_used_count"));
  if (hp->n_expert_used > hp->n_expert || hp->n_expert > 4096)
    return Errorf("{}: expert_used_count {} with expert_count {} is invalid", f.path(),
                  hp->n_expert_used, hp->n_expert);
  hp->n_ff_exp = static_cast<int64_t>(f.GetUintOr(a + "expert_feed_forward_length", 0));
  if (hp->n_ff_exp == 0) hp->n_ff_exp = hp->n_ff;
  hp->n_expert_shared = static_cast<int64_t>(f.GetUintOr(a + "expert_shared_count", 0));
  hp->n_layer_dense_lead = static_cast<int64_t>(f.GetUintOr(a + "leading_dense_block_count", 0));
  hp->expert_weights_norm = f.GetBoolOr(a + "expert_weights_norm", false);
  hp->expert_weights_scale = static_cast<float>(f.GetFloatOr(a + "expert_weights_scale", 0.0));
  const uint64_t g = f.GetUintOr(a + "expert_gating_func", 1);
  if (g != 1 && g != 2)
    return Errorf("{}: expert_gating_func {} is not supported (1 softmax, 2 sigmoid)", f.path(), g);
  hp->gating = static_cast<GatingFunc>(g);
  const uint64_t groups = f.GetUintOr(a + "expert_group_count", 1);
  if (groups > 1) return Errorf("{}: expert groups ({}) are not supported yet", f.path(), groups);
  return Status::Ok();
}

Status ReadMlaHParams(const gguf::File& f, HParams* hp) {
  const std::string a = hp->arch + ".";
  hp->q_lora_rank = static_cast<int64_t>(f.GetUintOr(a + "attention.q_lora_rank", 0));
  SHOAL_ASSIGN_OR_RETURN(hp->kv_lora_rank, ReadPositive(f, a + "attention.kv_lora_rank"));
  SHOAL_ASSIGN_OR_RETURN(hp->head_dim_k_mla, ReadPositive(f, a + "attention.key_length_mla"));
  SHOAL_ASSIGN_OR_RETURN(hp->head_dim_v_mla, ReadPositive(f, a + "attention.value_length_mla"));
  if (hp->n_head_kv != 1)
    return Errorf("{}: MLA needs head_count_kv 1 (absorbed latent attention), not {}", f.path(),
                  hp->n_head_kv);
  if (hp->head_dim_k != hp->kv_lora_rank + hp->n_rot || hp->head_dim_v != hp->kv_lora_rank ||
      hp->head_dim_k_mla <= hp->n_rot)
    return Errorf(
        "{}: MLA widths disagree: key_length {} (want kv_lora_rank {} + rope {}), value_length {}, "
        "key_length_mla {}",
        f.path(), hp->head_dim_k, hp->kv_lora_rank, hp->n_rot, hp->head_dim_v, hp->head_dim_k_mla);
  return Status::Ok();
}

std::string DescribeHParams(const HParams& hp) {
  const char* rope = hp.rope_type == RopeType::kNone   ? "none"
                     : hp.rope_type == RopeType::kNorm ? "norm"
                                                       : "neox";
  return fmt::format(
             "arch            {}\nname            {}\nn_vocab         {}\nn_ctx_train     {}\n"
             "n_embd          {}\nn_layer         {}\nn_head          {}\nn_head_kv       {}\n"
             "head_dim        {} (k) / {} (v)\nn_ff            {}\nrms_eps         {:g}\n"
             "rope            {} n_rot {} base {:g} scale {:g}{}\nqkv_bias        {}\nqk_norm      "
             "   {}\n"
             "tied_embd       {}\n",
             hp.arch, hp.name, hp.n_vocab, hp.n_ctx_train, hp.n_embd, hp.n_layer, hp.n_head,
             hp.n_head_kv, hp.head_dim_k, hp.head_dim_v, hp.n_ff, hp.rms_eps, rope, hp.n_rot,
             hp.rope_freq_base, hp.rope_freq_scale, hp.rope_yarn ? " (yarn)" : "", hp.qkv_bias,
             hp.qk_norm, hp.tied_embeddings) +
         (hp.n_expert == 0 ? std::string()
                           : fmt::format("experts         {} (top {}, ffn {}, shared {}, dense "
                                         "lead {}, {}, norm {}, scale {:g})\n",
                                         hp.n_expert, hp.n_expert_used, hp.n_ff_exp,
                                         hp.n_expert_shared, hp.n_layer_dense_lead,
                                         hp.gating == GatingFunc::kSigmoid ? "sigmoid" : "softmax",
                                         hp.expert_weights_norm, hp.expert_weights_scale)) +
         (!hp.is_mla()
              ? std::string()
              : fmt::format("mla             q_lora {} kv_lora {} k {} v {}\n", hp.q_lora_rank,
                            hp.kv_lora_rank, hp.head_dim_k_mla, hp.head_dim_v_mla));
}

}  // namespace shoal
