// Forward pass of the llama family (llama, qwen2, qwen3, qwen3moe): pre-norm blocks of GQA
// attention over the paged KV cache and a SwiGLU feed-forward network, dense or routed experts.
#pragma once

#include <memory>

#include "model/model.h"

namespace shoal {

// A model whose layers are llama-family blocks (Model::Load fills it).
std::unique_ptr<Model> NewDenseDecoder();

}  // namespace shoal
