// Architecture "qwen3moe": Qwen3 attention (per-head q/k RMSNorm, RoPE "neox") with an MoE
// feed-forward in every layer: softmax router, top-k, weights renormalised (norm_topk_prob).
#include "model/arch/llama/llama_family.h"

namespace shoal {
namespace {
Status LoadQwen3Moe(const gguf::File& f, HParams* hp) {
  hp->rope_type = RopeType::kNeox;
  hp->qk_norm = true;
  SHOAL_RETURN_IF_ERROR(ReadMoeHParams(f, hp));
  if (hp->n_expert == 0) return Errorf("{}: qwen3moe without expert_count", f.path());
  // llama.cpp's qwen3moe graph: build_moe_ffn(..., norm_w = true, w_scale = 0, SOFTMAX), no
  // shared expert, every layer MoE.
  hp->gating = GatingFunc::kSoftmax;
  hp->expert_weights_norm = true;
  hp->expert_weights_scale = 0.f;
  hp->n_expert_shared = 0;
  hp->n_layer_dense_lead = 0;
  return Status::Ok();
}
}  // namespace

const ArchDef kQwen3MoeArch = {"qwen3moe", LoadQwen3Moe, NewLlamaFamily};

}  // namespace shoal
