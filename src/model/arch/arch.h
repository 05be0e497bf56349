// The table of architectures. Each has one folder beside this file holding its hyper-parameter
// rules (an ArchDef) and its layers (a Model subclass): llama/ (llama, qwen2, qwen3, qwen3moe:
// one llama-family block), deepseek2/, kimi_k3/. Adding one: a folder, and a row in arch.cc.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "model/hparams.h"

namespace shoal {

class Model;

struct ArchDef {
  std::string_view name;  // general.architecture
  // Reads and validates hyper-parameters (after ReadCommonHParams).
  Status (*load_hparams)(const gguf::File& f, HParams* hp);
  // An empty model of the architecture's layers; Model::Load fills it.
  std::unique_ptr<Model> (*new_model)();
};

// Finds the definition of a `general.architecture` name, or null.
const ArchDef* FindArch(std::string_view name);
std::vector<std::string_view> ArchNames();

// Reads general.architecture and the hyper-parameters through its ArchDef.
Result<HParams> LoadHParams(const gguf::File& f);

}  // namespace shoal
