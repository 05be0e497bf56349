// Architecture "kimi-k3": Kimi K3 (Kimi Delta Attention recurrent layers where head_count_kv is
// 0, nope-only MLA layers with an output gate, block attention residuals, latent MoE, situ).
#include "arch/arch.h"

namespace shoal {
namespace {
Status LoadKimiK3(const gguf::File& f, HParams* hp) {
  const std::string a = "kimi-k3.";
  hp->rope_type = RopeType::kNone;
  if (hp->n_head_kv_per_layer.empty())
    return Errorf("{}: kimi-k3 needs a per-layer head_count_kv array", f.path());
  hp->n_head_kv = 1;  // the MLA layers: MQA over the latent
  SHOAL_RETURN_IF_ERROR(ReadMlaHParams(f, hp));
  SHOAL_RETURN_IF_ERROR(ReadMoeHParams(f, hp));
  hp->kda_head_dim = static_cast<int64_t>(f.GetUintOr(a + "kda.head_dim", 0));
  hp->ssm_d_conv = static_cast<int64_t>(f.GetUintOr(a + "ssm.conv_kernel", 0));
  if (hp->kda_head_dim <= 0 || hp->kda_head_dim > 256 || hp->ssm_d_conv < 1 || hp->ssm_d_conv > 16)
    return Errorf("{}: kda.head_dim {} / ssm.conv_kernel {} invalid", f.path(), hp->kda_head_dim,
                  hp->ssm_d_conv);
  if (!f.Find(a + "kda.gate_lower_bound"))
    return Errorf(
        "{}: kimi-k3 without kda.gate_lower_bound (Kimi-Linear softplus gate) is not "
        "supported",
        f.path());
  hp->kda_gate_lower_bound = static_cast<float>(f.GetFloatOr(a + "kda.gate_lower_bound", 0));
  hp->n_expert_latent = static_cast<int64_t>(f.GetUintOr(a + "expert_latent_length", 0));
  hp->situ_beta = static_cast<float>(f.GetFloatOr(a + "activation.situ_beta", 0));
  hp->situ_linear_beta = static_cast<float>(f.GetFloatOr(a + "activation.situ_linear_beta", 0));
  if (hp->situ_beta <= 0) return Errorf("{}: activation.situ_beta missing", f.path());
  hp->attn_res_block_size = static_cast<int64_t>(f.GetUintOr(a + "attn_res.block_size", 0));
  if (hp->n_expert == 0) return Errorf("{}: kimi-k3 without expert_count", f.path());
  return Status::Ok();
}
}  // namespace

const ArchDef kKimiK3Arch = {"kimi-k3", BlockFamily::kKimiK3, LoadKimiK3};

}  // namespace shoal
