// Architecture "llama": Llama 1/2/3, Mistral, TinyLlama (GQA, RoPE "norm" pairs (2i, 2i+1)),
// and Mixtral-style experts (softmax router, top-k weights renormalised to sum 1).
#include "model/arch/llama/llama_family.h"

namespace shoal {
namespace {
Status LoadLlama(const gguf::File& f, HParams* hp) {
  hp->rope_type = RopeType::kNorm;
  SHOAL_RETURN_IF_ERROR(ReadMoeHParams(f, hp));
  if (hp->n_expert > 0) {
    // llama.cpp's llama graph: build_moe_ffn(..., norm_w = true, w_scale = 0, SOFTMAX).
    hp->gating = GatingFunc::kSoftmax;
    hp->expert_weights_norm = true;
    hp->expert_weights_scale = 0.f;
    hp->n_expert_shared = 0;
    hp->n_layer_dense_lead = 0;
  }
  return Status::Ok();
}
}  // namespace

const ArchDef kLlamaArch = {"llama", LoadLlama, NewLlamaFamily};

}  // namespace shoal
