// Architecture "qwen2": Qwen2 / Qwen2.5 (q/k/v biases, RoPE "neox" pairs (i, i + n_rot/2)).
#include "model/arch/llama/llama_family.h"

namespace shoal {
namespace {
Status LoadQwen2(const gguf::File& f, HParams* hp) {
  hp->rope_type = RopeType::kNeox;
  hp->qkv_bias = true;
  return Status::Ok();
}
}  // namespace

const ArchDef kQwen2Arch = {"qwen2", LoadQwen2, NewLlamaFamily};

}  // namespace shoal
