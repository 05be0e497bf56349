// The table of architectures and the tensor lists shared by the dense llama family.
#include "arch/arch.h"

#include <fmt/format.h>

namespace shoal {

namespace {
const ArchDef* const kArchs[] = {&kLlamaArch, &kQwen2Arch, &kQwen3Arch};
}

const ArchDef* FindArch(std::string_view name) {
  for (const ArchDef* a : kArchs)
    if (a->name == name) return a;
  return nullptr;
}

std::vector<std::string_view> ArchNames() {
  std::vector<std::string_view> out;
  for (const ArchDef* a : kArchs) out.push_back(a->name);
  return out;
}

Result<HParams> LoadHParams(const gguf::File& f) {
  SHOAL_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  const ArchDef* def = FindArch(arch);
  if (!def) {
    std::string known;
    for (auto n : ArchNames()) known += (known.empty() ? "" : ", ") + std::string(n);
    return Errorf("{}: architecture '{}' is not supported (supported: {})", f.path(), arch, known);
  }
  HParams hp;
  SHOAL_RETURN_IF_ERROR(ReadCommonHParams(f, &hp));
  SHOAL_RETURN_IF_ERROR(def->load_hparams(f, &hp));
  return hp;
}

std::vector<TensorSpec> GlobalTensors(const HParams& hp) {
  std::vector<TensorSpec> t = {{"token_embd.weight", true}, {"output_norm.weight", true}};
  if (!hp.tied_embeddings) t.push_back({"output.weight", true});
  return t;
}

namespace dense {
std::vector<TensorSpec> LayerTensors(const HParams& hp, int il) {
  auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
  std::vector<TensorSpec> t = {
      {n("attn_norm.weight")}, {n("attn_q.weight")},      {n("attn_k.weight")},
      {n("attn_v.weight")},    {n("attn_output.weight")}, {n("ffn_norm.weight")},
      {n("ffn_gate.weight")},  {n("ffn_up.weight")},      {n("ffn_down.weight")},
  };
  // Biases are optional in every llama-family file (qwen2 always has q/k/v biases).
  for (const char* b : {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias"})
    t.push_back({n(b), hp.qkv_bias && std::string_view(b) != "attn_output.bias"});
  if (hp.qk_norm) {
    t.push_back({n("attn_q_norm.weight")});
    t.push_back({n("attn_k_norm.weight")});
  }
  return t;
}
}  // namespace dense

}  // namespace shoal
