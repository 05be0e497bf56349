// Architecture "kimi-k3": Kimi K3 (Kimi Delta Attention recurrent layers and nope-only MLA
// layers, block attention residuals, latent MoE with the situ activation).
#pragma once

#include "model/arch/arch.h"

namespace shoal {

extern const ArchDef kKimiK3Arch;

}  // namespace shoal
