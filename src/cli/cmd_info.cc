// `shoal info -m MODEL`: architecture, hyper-parameters, metadata and tensor summary.
#include <fmt/format.h>

#include <map>

#include "cli/commands.h"
#include "cli/common.h"
#include "model/arch/arch.h"

namespace shoal::cli {

void AddInfoCommand(CLI::App& app, Runner* runner) {
  auto* cmd =
      app.add_subcommand("info", "Print a model's architecture, hyper-parameters and tensors");
  auto model = std::make_shared<std::string>();
  auto all_kv = std::make_shared<bool>(false);
  auto tensors = std::make_shared<bool>(false);
  cmd->add_option("-m,--model", *model, "GGUF model file (first shard of a split model)")
      ->required();
  cmd->add_flag("--metadata", *all_kv, "List every metadata key and value");
  cmd->add_flag("--tensors", *tensors, "List every tensor with its type and shape");
  cmd->callback([=] {
    *runner = [=]() -> int {
      auto f = gguf::File::Open(*model);
      if (!f.ok()) return Fail(f.status());
      const gguf::File& file = **f;
      fmt::print("file            {} (GGUF v{}, {} bytes, alignment {})\n", file.path(),
                 file.version(), file.file_bytes(), file.alignment());
      auto hp = LoadHParams(file);
      if (hp.ok()) {
        fmt::print("{}", DescribeHParams(*hp));
      } else {
        fmt::print("hparams         unavailable: {}\n", hp.status().message());
      }
      std::map<std::string, std::pair<int, uint64_t>> by_type;
      uint64_t total = 0;
      int64_t params = 0;
      for (const auto& t : file.tensors()) {
        auto& e = by_type[std::string(DTypeName(t.type))];
        e.first++;
        e.second += t.nbytes;
        total += t.nbytes;
        params += t.n_elements();
      }
      fmt::print("tensors         {} ({:.2f} MiB, {:.3f} B parameters)\n", file.tensors().size(),
                 static_cast<double>(total) / (1 << 20), static_cast<double>(params) / 1e9);
      for (const auto& [name, e] : by_type)
        fmt::print("  {:<8} {:>5} tensors {:>10.2f} MiB\n", name, e.first,
                   static_cast<double>(e.second) / (1 << 20));
      fmt::print("metadata keys   {}\n", file.metadata().size());
      if (*all_kv)
        for (const auto& [k, v] : file.metadata()) fmt::print("  {} = {}\n", k, v.ToString());
      if (*tensors)
        for (const auto& t : file.tensors())
          fmt::print("  {:<40} {:<6} [{}, {}, {}, {}]\n", t.name, DTypeName(t.type), t.ne[0],
                     t.ne[1], t.ne[2], t.ne[3]);
      return 0;
    };
  });
}

}  // namespace shoal::cli
