// Forward pass of kimi-k3: KDA recurrent and nope-only MLA layers, block attention residuals,
// latent MoE with situ activation. The KDA state lives in the model, one per sequence.
#pragma once

#include <memory>

#include "model/model.h"

namespace shoal {

// A model whose layers are kimi-k3 blocks (Model::Load fills it).
std::unique_ptr<Model> NewKimiK3();

}  // namespace shoal
