// The llama family: llama, qwen2, qwen3 and qwen3moe run one block (pre-norm GQA attention over
// the paged KV cache, then a SwiGLU feed-forward network, dense or routed experts by hparams);
// each architecture's file here holds only its hyper-parameter rules.
#pragma once

#include <memory>

#include "model/arch/arch.h"

namespace shoal {

extern const ArchDef kLlamaArch;     // llama.cc
extern const ArchDef kQwen2Arch;     // qwen2.cc
extern const ArchDef kQwen3Arch;     // qwen3.cc
extern const ArchDef kQwen3MoeArch;  // qwen3moe.cc

// An empty model of llama-family layers (llama_family.cc; Model::Load fills it).
std::unique_ptr<Model> NewLlamaFamily();

}  // namespace shoal
