// Architecture registry: each supported architecture has one file (llama.cc, qwen2.cc, ...)
// that reads its hyper-parameters and names the forward pass that runs it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "arch/hparams.h"

namespace shoal {

// Which forward-pass implementation of the model module runs the architecture.
// kDenseDecoder: llama/qwen blocks (GQA attention, dense or MoE SwiGLU FFN);
// kMlaDecoder: deepseek2 blocks (latent attention, dense lead layers, routed + shared experts);
// kKimiK3: KDA recurrent + MLA layers, attention residuals, latent MoE.
enum class BlockFamily { kDenseDecoder, kMlaDecoder, kKimiK3 };

struct ArchDef {
  std::string_view name;
  BlockFamily family;
  // Reads and validates hyper-parameters (after ReadCommonHParams).
  Status (*load_hparams)(const gguf::File& f, HParams* hp);
};

// Finds the definition of a `general.architecture` name, or null.
const ArchDef* FindArch(std::string_view name);
std::vector<std::string_view> ArchNames();

// Reads general.architecture and the hyper-parameters through its ArchDef.
Result<HParams> LoadHParams(const gguf::File& f);

extern const ArchDef kLlamaArch;
extern const ArchDef kQwen2Arch;
extern const ArchDef kQwen3Arch;
extern const ArchDef kQwen3MoeArch;
extern const ArchDef kDeepseek2Arch;
extern const ArchDef kKimiK3Arch;

}  // namespace shoal
