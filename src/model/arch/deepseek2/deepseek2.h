// Architecture "deepseek2": DeepSeek-V2/V3 and Kimi K2 (multi-head latent attention, leading
// dense layers, then routed experts with sigmoid or softmax gating plus shared experts, YaRN).
#pragma once

#include "model/arch/arch.h"

namespace shoal {

extern const ArchDef kDeepseek2Arch;

// llama.cpp's YaRN pre-scaling for deepseek2 (llama-context + models/deepseek2.cpp): the rope
// attn_factor cancels ggml's own 1 + 0.1 ln(1/freq_scale), and the KQ scale carries
// mscale^2 with mscale = 1 + yarn_log_mul ln(1/freq_scale). Without YaRN: 1 and 1/sqrt(hk).
struct MlaScales {
  float rope_attn_factor = 1.f;
  float kq_scale = 1.f;
};
MlaScales DeepseekScales(const HParams& hp);

}  // namespace shoal
