// Architecture "qwen2": Qwen2 / Qwen2.5 (q/k/v biases, RoPE "neox" pairs (i, i + n_rot/2)).
#include "arch/arch.h"

namespace shoal {
namespace {
Status LoadQwen2(const gguf::File& f, HParams* hp) {
  hp->rope_type = RopeType::kNeox;
  hp->qkv_bias = true;
  return Status::Ok();
}
}  // namespace

const ArchDef kQwen2Arch = {"qwen2", BlockFamily::kDenseDecoder, LoadQwen2};

}  // namespace shoal
