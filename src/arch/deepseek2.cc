// Architecture "deepseek2": DeepSeek-V2/V3 and Kimi K2 (multi-head latent attention with q/kv
// LoRA ranks and a decoupled RoPE part, leading dense layers, routed + shared experts, YaRN).
#include "arch/arch.h"

namespace shoal {
namespace {
Status LoadDeepseek2(const gguf::File& f, HParams* hp) {
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
}  // namespace

const ArchDef kDeepseek2Arch = {"deepseek2", BlockFamily::kMlaDecoder, LoadDeepseek2};

}  // namespace shoal
