// Forward pass of kimi-k3: KDA recurrent and nope-only MLA layers, block attention residuals,
// latent MoE with situ activation. The KDA state lives in the model, one per sequence.
#pragma once

#include <memory>

#include "model/model.h"

namespace shoal {

Result<std::unique_ptr<Model>> LoadKimiK3(const gguf::File& f, const HParams& hp,
                                          const LoadOptions& opt);

}  // namespace shoal
