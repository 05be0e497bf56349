// Architecture "qwen3": Qwen3 dense (per-head RMSNorm of q and k before RoPE "neox"; no biases).
#include "model/arch/llama/llama_family.h"

namespace shoal {
namespace {
Status LoadQwen3(const gguf::File& f, HParams* hp) {
  hp->rope_type = RopeType::kNeox;
  hp->qk_norm = true;
  return Status::Ok();
}
}  // namespace

const ArchDef kQwen3Arch = {"qwen3", LoadQwen3, NewLlamaFamily};

}  // namespace shoal
