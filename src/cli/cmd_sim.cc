// `shoal sim`: the real placement and scheduler on a simulated cluster (SimGrid), with failures.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "planner/presets.h"
#include "sim/sim.h"

namespace shoal::cli {

// From cmd_plan.cc: a model preset or .gguf, and a device preset, "local" or .json.
Result<planner::ModelProfile> LoadModelProfile(const std::string& model, std::optional<DType> type);
Result<planner::DevicePreset> LoadDevice(const std::string& device);

void AddSimCommand(CLI::App& app, Runner* runner) {
  auto* cmd = app.add_subcommand(
      "sim", "Simulate serving on a cluster (SimGrid): placement, scheduler, failures");
  struct Opts {
    std::string model, device = "ps3", workload = "poisson:1,in:512,out:128", failures,
                       duration = "10m";
    sim::SimOptions sim;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "Model preset or .gguf file (as for `shoal plan`)")
      ->required();
  cmd->add_option("-d,--device", o->device, "Device preset, local, or a NodeInfo .json file");
  cmd->add_option("-n,--nodes", o->sim.nodes, "Nodes in the platform (spares beyond the replicas)")
      ->required();
  cmd->add_option("--topology", o->sim.topology, "Network: star (one non-blocking switch)");
  cmd->add_option("--workload", o->workload, "poisson:RATE(req/s),in:PROMPT,out:OUTPUT tokens");
  cmd->add_option("--failures", o->failures, "mtbf:HOURS per node (hosts turned off at random)");
  cmd->add_option("--duration", o->duration, "Simulated time: 10m, 90s, 2h");
  cmd->add_option("--seed", o->sim.seed, "Random seed (arrivals, failures)");
  cmd->add_option("--context", o->sim.context, "KV tokens reserved per sequence");
  cmd->add_option("--concurrency", o->sim.concurrency,
                  "Sequences in flight in total (default 8 per lane)");
  cmd->add_option("--lanes", o->sim.lanes, "Micro-batch lanes (scheduler instances) per replica");
  cmd->add_flag("--json", o->json, "Print the report as JSON");
  cmd->callback([o, runner] {
    *runner = [o]() -> int {
      auto w = sim::ParseWorkload(o->workload);
      if (!w.ok()) return Fail(w.status());
      o->sim.workload = *w;
      auto d = sim::ParseDuration(o->duration);
      if (!d.ok()) return Fail(d.status());
      o->sim.duration_s = *d;
      if (!o->failures.empty()) {
        if (o->failures.rfind("mtbf:", 0) != 0)
          return Fail(Errorf("sim: --failures wants mtbf:HOURS, got '{}'", o->failures));
        try {
          o->sim.mtbf_hours = std::stod(o->failures.substr(5));
        } catch (...) {
          return Fail(Errorf("sim: bad MTBF in '{}'", o->failures));
        }
      }
      auto profile = LoadModelProfile(o->model, std::nullopt);
      if (!profile.ok()) return Fail(profile.status());
      auto device = LoadDevice(o->device);
      if (!device.ok()) return Fail(device.status());
      auto r = sim::RunSim(*profile, *device, o->sim);
      if (!r.ok()) return Fail(r.status());
      fmt::print("{}\n", o->json ? sim::SimReportToJson(*r) : sim::FormatSimReport(*r));
      return r->tokens_lost == 0 ? 0 : 2;
    };
  });
}

}  // namespace shoal::cli
