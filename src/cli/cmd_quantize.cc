// `shoal quantize IN OUT TYPE`: requantize a GGUF model with one of llama.cpp's mixes.
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "modelgen/quantize.h"

namespace shoal::cli {

void AddQuantizeCommand(CLI::App& app, Runner* runner) {
  std::string mixes;
  for (const std::string& m : QuantizeMixNames()) mixes += (mixes.empty() ? "" : ", ") + m;
  auto* cmd = app.add_subcommand(
      "quantize", "Requantize a GGUF model with a llama-quantize mix (output loads in llama.cpp)");
  struct Args {
    std::string in, out, type;
    int threads = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("input", a->in, "Input GGUF file")->required();
  cmd->add_option("output", a->out, "Output GGUF file")->required();
  cmd->add_option("type", a->type, "Mix: " + mixes)->required();
  cmd->add_option("-t,--threads", a->threads, "Threads (0: all)")->capture_default_str();
  cmd->callback([=] {
    *runner = [=]() -> int {
      QuantizeOptions o;
      o.mix = a->type;
      o.n_threads = ResolveThreads(a->threads);
      QuantizeStats stats;
      o.stats = &stats;
      o.progress = [](double frac) {
        const int w = 40, n = static_cast<int>(frac * w);
        std::fprintf(stderr, "\r[%.*s%*s] %3.0f%%", n,
                     "========================================", w - n, "", frac * 100);
      };
      const auto t0 = std::chrono::steady_clock::now();
      Status s = QuantizeModel(a->in, a->out, o);
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!s.ok()) return Fail(s);
      std::fprintf(stderr, "\n");
      if (stats.n_fallback > 0) {
        std::fprintf(stderr, "%d tensors had rows that are not whole blocks: fallback types used\n",
                     stats.n_fallback);
      }
      const double n = static_cast<double>(stats.n_elements > 0 ? stats.n_elements : 1);
      std::printf(
          "%s: %.2f MiB (%.2f bpw) -> %s: %.2f MiB (%.2f bpw), %d tensors converted, %.1f s\n",
          a->in.c_str(), stats.in_bytes / 1048576.0, stats.in_bytes * 8.0 / n, a->out.c_str(),
          stats.out_bytes / 1048576.0, stats.out_bytes * 8.0 / n, stats.n_converted, secs);
      return 0;
    };
  });
}

}  // namespace shoal::cli
