// `shoal plan`: how many of a device a model needs, how it is placed and how fast it runs.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "io/mapped_file.h"
#include "measure/node_measure.h"
#include "planner/capacity.h"
#include "planner/parallel.h"
#include "planner/presets.h"

namespace shoal::cli {
namespace {

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A GGUF file's profile, its matrices re-typed to `type` when given.
Result<planner::ModelProfile> GgufProfile(const std::string& path, std::optional<DType> type) {
  SHOAL_ASSIGN_OR_RETURN(auto f, gguf::File::Open(path));
  SHOAL_ASSIGN_OR_RETURN(planner::ModelProfile p, planner::ProfileFromGguf(*f));
  if (!type) return p;
  std::vector<planner::TensorEntry> entries;
  for (const gguf::TensorInfo& ti : f->tensors()) {
    std::vector<int64_t> ne(ti.ne.begin(), ti.ne.begin() + ti.n_dims);
    const DType t =
        ti.n_dims >= 2 && ti.name.find("gate_inp") == std::string::npos ? *type : ti.type;
    SHOAL_ASSIGN_OR_RETURN(planner::TensorEntry e, planner::TensorEntry::FromShape(ti.name, t, ne));
    entries.push_back(std::move(e));
  }
  planner::ModelProfile q = p;
  SHOAL_ASSIGN_OR_RETURN(q, planner::ProfileFromTensors(p.hp, entries));
  q.moe = p.moe;
  q.attn = p.attn;
  return q;
}

}  // namespace

Result<planner::ModelProfile> LoadModelProfile(const std::string& model,
                                               std::optional<DType> type) {
  if (EndsWith(model, ".gguf")) return GgufProfile(model, type);
  return planner::ModelPresetProfile(model, type);
}

Result<planner::DevicePreset> LoadDevice(const std::string& device, int threads,
                                         const planner::ModelProfile& model) {
  if (device == "local") {
    // This machine, measured as `shoal node` measures itself (STREAM triad, weight streaming,
    // matmul and attention speed) at the model's shapes; a node may use 80% of the memory
    // available now.
    const HParams& hp = model.hp;
    measure::MeasureShape shape;  // a width the model leaves 0 keeps its default
    const int64_t ff = hp.n_ff > 0 ? hp.n_ff : hp.n_ff_exp;
    if (hp.head_dim_k > 0) shape.head_dim = static_cast<int>(hp.head_dim_k);
    if (hp.n_embd > 0) shape.n_embd = hp.n_embd;
    if (ff > 0) shape.n_ff = ff;
    if (hp.q_dim() > 0) shape.q_rows = hp.q_dim();
    if (hp.k_dim() > 0) shape.kv_rows = hp.k_dim();
    auto add_types = [&](const planner::TensorCost& c) {
      for (const planner::TypedParams& t : c.matmul)
        if (std::find(shape.types.begin(), shape.types.end(), t.type) == shape.types.end())
          shape.types.push_back(t.type);
    };
    for (const planner::TensorCost& l : model.layers) add_types(l);
    add_types(model.head);
    SHOAL_ASSIGN_OR_RETURN(uint64_t mem, ParseMemSize("0.8", "--device local"));
    planner::DevicePreset d;
    d.name = "local";
    d.description = "this machine (measured)";
    d.node = measure::MeasureNode("local", "", mem, ResolveThreads(threads), shape);
    // Stages started on this one machine (`cluster up`) share its memory bus.
    d.node.corun_slowdown = measure::MeasureCoRunSlowdown(shape, HardwareThreads());
    d.mem_total = mem;
    for (const auto& [t, f] : d.node.matmul_flops) d.peak_flops = std::max(d.peak_flops, f);
    return d;
  }
  if (EndsWith(device, ".json")) {
    SHOAL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(device));
    return planner::DeviceFromJson(text, device);
  }
  return planner::FindDevicePreset(device);
}

void AddSplitOptions(CLI::App* cmd, SplitArgs* a) {
  cmd->add_option("--parallel", a->parallel,
                  "Stages of tensor-parallel groups, as `shoal serve --parallel`: tp=T[,pp=S] "
                  "(pp sets --stages)");
  cmd->add_option("--tp-mode", a->tp_mode, "With --parallel: exact or fast")
      ->check(CLI::IsMember({"exact", "fast"}));
  cmd->add_option("--collective-us", a->collective_us,
                  "A collective call's cost beyond its bytes, us (0: the link's one-way latency; "
                  "tools/calibrate measures it)");
}

Status ApplySplitOptions(const SplitArgs& a, planner::CapacityOptions* cap) {
  SHOAL_ASSIGN_OR_RETURN(const planner::Parallel par, planner::ParseParallel(a.parallel));
  if (par.ep > 0 && par.ep != par.tp) return Errorf("--parallel: ep must equal tp");
  cap->tp = par.tp;
  if (par.pp > 0) cap->stages = par.pp;
  cap->tp_fast = a.tp_mode == "fast";
  if (!(a.collective_us >= 0)) return Errorf("--collective-us must be >= 0");
  cap->collective_s = a.collective_us * 1e-6;
  return Status::Ok();
}

void OverrideLink(planner::DevicePreset* d, double mbit, double latency_us,
                  double cpu_ns_per_byte) {
  if (mbit > 0) d->node.link_bw = mbit * 1e6 / 8;
  if (latency_us > 0) d->node.link_latency_s = latency_us * 1e-6;
  if (cpu_ns_per_byte > 0) d->node.link_cpu_s_per_byte = cpu_ns_per_byte * 1e-9;
}

void AddPlanCommand(CLI::App& app, Runner* runner) {
  auto* cmd = app.add_subcommand(
      "plan",
      "How many of a device a model needs, its placement and predicted speed (closed form)");
  struct Opts {
    std::string model, device = "ps3", type, link, link_dtype = "f16", save_device;
    planner::CapacityOptions cap;
    bool json = false, seed = false;
    int threads = 0;
    double step_overhead_ms = 0, link_mbit = 0, link_latency_us = 0, link_cpu_ns = 0;
    SplitArgs split;
  };
  auto o = std::make_shared<Opts>();
  std::string models, devices, links;
  for (auto n : planner::ModelPresetNames()) models += (models.empty() ? "" : "|") + std::string(n);
  for (auto n : planner::DevicePresetNames()) devices += std::string(n) + "|";
  for (auto l : planner::LinkPresets()) links += (links.empty() ? "" : "|") + std::string(l.name);
  cmd->add_option("-m,--model", o->model, "Model preset (" + models + ") or a .gguf file");
  cmd->add_option("-d,--device", o->device,
                  "Device preset (" + devices +
                      "local = this machine, measured) or a NodeInfo "
                      ".json file (optional power_w, price_usd)");
  cmd->add_option("-n,--nodes", o->cap.nodes,
                  "Devices available (0 = the fewest that hold weights + KV); more make replicas");
  cmd->add_option("--type", o->type,
                  "Weight type of every matrix (q4_0, q8_0, mxfp4, f16, ...); default: the "
                  "file's types, or the preset's mix (q4_0; kimi-k3 routed experts mxfp4)");
  cmd->add_option("--context", o->cap.context, "Tokens per sequence (KV reserved for each)");
  cmd->add_option("--concurrency", o->cap.concurrency, "Sequences in flight in total");
  cmd->add_option("--prompt", o->cap.prompt, "Prompt tokens for TTFT (default context / 2)");
  cmd->add_option("--batch-tokens", o->cap.batch_tokens, "Prefill chunk (max batched tokens)");
  cmd->add_option("--stages", o->cap.stages,
                  "Whole-layer pipeline stages per replica (default: the fewest that fit)");
  AddSplitOptions(cmd, &o->split);
  cmd->add_option("--output", o->cap.output,
                  "Tokens generated per request: price decode at prompt + output / 2 and report "
                  "served tokens/s with prefill");
  cmd->add_option("--step-overhead-ms", o->step_overhead_ms,
                  "Fixed time per engine step outside the forward passes (tools/calibrate "
                  "measures it)");
  cmd->add_option("--pipeline-groups", o->cap.pipeline_groups,
                  "Sequence groups with a step in flight each, as `shoal serve --pipeline-groups` "
                  "(1: one step at a time; 0: serve's default, one per stage, 1 for recurrent "
                  "models)")
      ->capture_default_str();
  cmd->add_option("--host-cores", o->cap.host_cores,
                  "Every stage on one machine of this many cores (`shoal cluster up` on one "
                  "box; 0: each node its own machine)");
  cmd->add_option("-t,--threads", o->threads, "Threads per node for --device local (0 = all)");
  cmd->add_option("--link", o->link, "Link between nodes (" + links + "; default: the device's)");
  cmd->add_option("--link-mbit", o->link_mbit, "Link bandwidth, Mbit/s (after --link)");
  cmd->add_option("--link-latency-us", o->link_latency_us,
                  "One-way link latency, us (after --link)");
  cmd->add_option("--link-cpu-ns-per-byte", o->link_cpu_ns,
                  "CPU the network stacks at both ends spend per byte sent, ns, charged to the "
                  "sending stage (tools/calibrate measures it)");
  cmd->add_option("--link-type", o->link_dtype, "Activations on the wire: f32, f16 or q8_0");
  cmd->add_option("--save-device", o->save_device,
                  "Write the device (e.g. local, as measured now) as a NodeInfo .json file that "
                  "--device FILE.json reads back, then plan as usual");
  cmd->add_flag("--json", o->json, "Print the report as JSON");
  cmd->add_flag("--seed-check", o->seed,
                "Reproduce the original PS3 capacity arithmetic and list what it leaves out");
  cmd->callback([o, runner] {
    *runner = [o]() -> int {
      if (o->seed) {
        fmt::print("{}", planner::FormatSeedCheck(planner::ComputeSeedCheck()));
        return 0;
      }
      if (o->model.empty()) return Fail(Status::Error("plan: --model is required"));
      std::optional<DType> type;
      if (!o->type.empty()) {
        type = DTypeFromName(o->type);
        if (!type) return Fail(Errorf("plan: unknown --type '{}'", o->type));
      }
      auto profile = LoadModelProfile(o->model, type);
      if (!profile.ok()) return Fail(profile.status());
      o->cap.step_overhead_s = o->step_overhead_ms * 1e-3;
      if (Status st = ApplySplitOptions(o->split, &o->cap); !st.ok()) return Fail(st);
      auto device = LoadDevice(o->device, o->threads, *profile);
      if (!device.ok()) return Fail(device.status());
      if (!o->link.empty()) {
        auto l = planner::FindLinkPreset(o->link);
        if (!l.ok()) return Fail(l.status());
        device->node.link_bw = l->bw;
        device->node.link_latency_s = l->latency_s;
      }
      OverrideLink(&*device, o->link_mbit, o->link_latency_us, o->link_cpu_ns);
      if (!o->save_device.empty()) {
        std::FILE* f = std::fopen(o->save_device.c_str(), "w");
        if (f == nullptr) return Fail(Errorf("plan: cannot write {}", o->save_device));
        const std::string text = measure::NodeInfoToJson(device->node);
        const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
        if (std::fclose(f) != 0 || !ok)
          return Fail(Errorf("plan: short write to {}", o->save_device));
      }
      auto ld = planner::ParseLinkDType(o->link_dtype);
      if (!ld.ok()) return Fail(ld.status());
      o->cap.link_dtype = *ld;
      auto r = planner::PlanCapacity(*profile, *device, o->cap);
      if (!r.ok()) return Fail(r.status());
      fmt::print("{}\n", o->json ? planner::CapacityToJson(*r) : planner::FormatCapacity(*r));
      return 0;
    };
  });
}

}  // namespace shoal::cli
