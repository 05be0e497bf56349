// The table of architectures (a table, not self-registration: the linker drops unreferenced
// objects of a static library).
#include "model/arch/arch.h"

#include "model/arch/deepseek2/deepseek2.h"
#include "model/arch/kimi_k3/kimi_k3.h"
#include "model/arch/llama/llama_family.h"

namespace shoal {

namespace {
const ArchDef* const kArchs[] = {&kLlamaArch,    &kQwen2Arch,     &kQwen3Arch,
                                 &kQwen3MoeArch, &kDeepseek2Arch, &kKimiK3Arch};
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

}  // namespace shoal
