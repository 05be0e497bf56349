// `shoal synth`: write a random-weight model of a realistic shape (for speed work and demos).
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "modelgen/synth.h"

namespace shoal::cli {

void AddSynthCommand(CLI::App& app, Runner* runner) {
  auto* cmd = app.add_subcommand(
      "synth", "Write a random-weight model with a working tokenizer (loadable by llama.cpp)");
  struct Args {
    std::string arch = "llama", preset = "tiny", out, type = "f32";
    uint64_t seed = 1;
    int64_t layers = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--arch", a->arch, "Architecture: llama, qwen3moe, deepseek2 or kimi-k3")
      ->capture_default_str();
  cmd->add_option(
         "--preset", a->preset,
         "Shape: llama tiny, 1b (TinyLlama-1.1B) or 7b (Llama-2-7B); MoE archs tiny "
         "(the shapes of shared/models/tiny) or small (64 experts top-8, a few hundred MB)")
      ->capture_default_str();
  cmd->add_option("-o,--output", a->out, "Output GGUF file")->required();
  cmd->add_option("--type", a->type, "Weight type: f32, f16, q8_0 or q4_0")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Random seed")->capture_default_str();
  cmd->add_option("--layers", a->layers, "Layer count (default: the preset's)");
  cmd->callback([=] {
    *runner = [=]() -> int {
      auto t = DTypeFromName(a->type);
      if (!t) return Fail(Errorf("unknown --type '{}'", a->type));
      SynthOptions o;
      o.arch = a->arch;
      o.preset = a->preset;
      o.type = *t;
      o.seed = a->seed;
      o.n_layer = a->layers;
      o.progress = [](double frac) {
        const int w = 40, n = static_cast<int>(frac * w);
        std::fprintf(stderr, "\r[%.*s%*s] %3.0f%%", n,
                     "========================================", w - n, "", frac * 100);
      };
      Status s = SynthesizeModel(o, a->out);
      std::fprintf(stderr, "\n");
      if (!s.ok()) return Fail(s);
      std::printf("wrote %s\n", a->out.c_str());
      return 0;
    };
  });
}

}  // namespace shoal::cli
