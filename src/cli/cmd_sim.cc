// `shoal sim`: the real placement and scheduler on a simulated cluster (SimGrid), with failures.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "planner/presets.h"
#include "sim/sim.h"

namespace shoal::cli {

// From cmd_plan.cc: a model preset or .gguf, and a device preset, "local" or .json.
Result<planner::ModelProfile> LoadModelProfile(const std::string& model, std::optional<DType> type);
Result<planner::DevicePreset> LoadDevice(const std::string& device, int threads,
                                         const planner::ModelProfile& model);
// From cmd_plan.cc: --link-mbit / --link-latency-us / --link-cpu-ns-per-byte override the
// device's link (0 keeps the device's figure).
void OverrideLink(planner::DevicePreset* d, double mbit, double latency_us, double cpu_ns_per_byte);
// From cmd_plan.cc: --parallel, --tp-mode and --collective-us, as `shoal plan` takes them.
void AddSplitOptions(CLI::App* cmd, SplitArgs* a);
Status ApplySplitOptions(const SplitArgs& a, planner::CapacityOptions* cap);

void AddSimCommand(CLI::App& app, Runner* runner) {
  auto* cmd = app.add_subcommand(
      "sim", "Simulate serving on a cluster (SimGrid): placement, scheduler, failures");
  struct Opts {
    std::string link_dtype = "f16";
    std::string model, device = "ps3", workload = "poisson:1,in:512,out:128", failures,
                       duration = "10m";
    sim::SimOptions sim;
    bool json = false;
    int threads = 0;
    double step_overhead_ms = 0, link_mbit = 0, link_latency_us = 0, link_cpu_ns = 0;
    SplitArgs split;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "Model preset or .gguf file (as for `shoal plan`)")
      ->required();
  cmd->add_option("-d,--device", o->device, "Device preset, local, or a NodeInfo .json file");
  cmd->add_option("-n,--nodes", o->sim.nodes, "Nodes in the platform (spares beyond the replicas)")
      ->required();
  cmd->add_option(
      "--topology", o->sim.topology,
      "Network: star (one non-blocking switch) or fat-tree (32-port leaves under 32 spines)");
  cmd->add_option("--workload", o->workload, "poisson:RATE(req/s),in:PROMPT,out:OUTPUT tokens");
  cmd->add_option("--failures", o->failures, "mtbf:HOURS per node (hosts turned off at random)");
  cmd->add_option("--duration", o->duration, "Simulated time: 10m, 90s, 2h");
  cmd->add_option("--seed", o->sim.seed, "Random seed (arrivals, failures)");
  cmd->add_option("--context", o->sim.context, "KV tokens reserved per sequence");
  cmd->add_option("--concurrency", o->sim.concurrency,
                  "Sequences in flight in total (default 8 per lane)");
  cmd->add_option("--lanes", o->sim.lanes, "Micro-batch lanes (scheduler instances) per replica");
  cmd->add_option("--stages", o->sim.stages, "Whole-layer pipeline stages per replica");
  AddSplitOptions(cmd, &o->split);
  cmd->add_option("--step-overhead-ms", o->step_overhead_ms,
                  "Fixed time per engine step outside the forward passes");
  cmd->add_option("--pipeline-groups", o->sim.pipeline_groups,
                  "Sequence groups per replica, as `shoal serve --pipeline-groups`: 1 = one step "
                  "in flight per replica; G > 1 = lanes that step independently; 0: serve's "
                  "default, one per stage (1 for recurrent models)")
      ->capture_default_str();
  cmd->add_option("--host-cores", o->sim.host_cores,
                  "Every node's compute on one machine of this many cores (`shoal cluster up` "
                  "on one box; 0: each node its own machine; star topology)");
  cmd->add_option("-t,--threads", o->threads, "Threads per node for --device local (0 = all)");
  cmd->add_option("--link-mbit", o->link_mbit, "Link bandwidth, Mbit/s (overrides the device's)");
  cmd->add_option("--link-latency-us", o->link_latency_us, "One-way link latency, microseconds");
  cmd->add_option("--link-cpu-ns-per-byte", o->link_cpu_ns,
                  "CPU the network stacks at both ends spend per byte sent, ns (as plan)");
  cmd->add_option("--link-cpu-send-share", o->sim.link_cpu_send_share,
                  "Share of that CPU the sending stage spends in its send; the rest runs beside "
                  "it while the bytes are on the wire (tools/calibrate measures it)")
      ->capture_default_str();
  cmd->add_option("--link-type", o->link_dtype, "Activations on the wire: f32, f16 or q8_0");
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
      auto device = LoadDevice(o->device, o->threads, *profile);
      if (!device.ok()) return Fail(device.status());
      OverrideLink(&*device, o->link_mbit, o->link_latency_us, o->link_cpu_ns);
      o->sim.step_overhead_s = o->step_overhead_ms * 1e-3;
      planner::CapacityOptions split;
      split.stages = o->sim.stages;
      if (Status st = ApplySplitOptions(o->split, &split); !st.ok()) return Fail(st);
      o->sim.stages = split.stages;
      o->sim.tp = split.tp;
      o->sim.tp_fast = split.tp_fast;
      o->sim.collective_s = split.collective_s;
      auto ld = planner::ParseLinkDType(o->link_dtype);
      if (!ld.ok()) return Fail(ld.status());
      o->sim.link_dtype = *ld;
      auto r = sim::RunSim(*profile, *device, o->sim);
      if (!r.ok()) return Fail(r.status());
      fmt::print("{}\n", o->json ? sim::SimReportToJson(*r) : sim::FormatSimReport(*r));
      return r->tokens_lost == 0 ? 0 : 2;
    };
  });
}

}  // namespace shoal::cli
