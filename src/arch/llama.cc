// Architecture "llama": Llama 1/2/3, Mistral, TinyLlama (GQA, RoPE "norm" pairs (2i, 2i+1)).
#include "arch/arch.h"

namespace shoal {
namespace {
Status LoadLlama(const gguf::File& f, HParams* hp) {
  hp->rope_type = RopeType::kNorm;
  if (f.GetUintOr("llama.expert_count", 0) > 0)
    return Errorf("{}: llama MoE (Mixtral-style experts) is not supported yet", f.path());
  return Status::Ok();
}
}  // namespace

const ArchDef kLlamaArch = {"llama", BlockFamily::kDenseDecoder, LoadLlama};

}  // namespace shoal
