// `shoal bench`: llama-bench-style throughput table (or JSON), optionally against the
// memory-bandwidth roofline of this machine.
#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli_version.h"
#include "engine/bench.h"
#include "threading/membw.h"
#include "threading/thread_pool.h"

namespace shoal::cli {
namespace {

// llama.cpp's names for general.file_type (llama_model_ftype_name), so tables compare.
std::string FtypeName(uint64_t ftype) {
  switch (ftype) {
    case 0:
      return "all F32";
    case 1:
      return "F16";
    case 2:
      return "Q4_0";
    case 3:
      return "Q4_1";
    case 7:
      return "Q8_0";
    case 8:
      return "Q5_0";
    case 9:
      return "Q5_1";
    case 10:
      return "Q2_K - Medium";
    case 11:
      return "Q3_K - Small";
    case 12:
      return "Q3_K - Medium";
    case 13:
      return "Q3_K - Large";
    case 14:
      return "Q4_K - Small";
    case 15:
      return "Q4_K - Medium";
    case 16:
      return "Q5_K - Small";
    case 17:
      return "Q5_K - Medium";
    case 18:
      return "Q6_K";
    case 32:
      return "BF16";
    case 38:
      return "MXFP4 MoE";
    default:
      return "?";
  }
}

// "1B", "260K", "7B": the parameter count rounded as model cards name it.
std::string SizeLabel(int64_t params) {
  const double p = static_cast<double>(params);
  if (p >= 1e9) return fmt::format("{:.0f}B", p / 1e9);
  if (p >= 1e6) return fmt::format("{:.0f}M", p / 1e6);
  return fmt::format("{:.0f}K", p / 1e3);
}

struct BenchArgs {
  std::string model, kv_type = "f16";
  int n_prompt = 512, n_gen = 128, threads = 0, reps = 3;
  bool json = false, roofline = false, no_warmup = false;
  // llama-bench's -mmp: 1 maps the file; 0 (default) reads it into transparent huge pages, which
  // decoded 1b Q4_K_M at 39.0 vs 35.5 tok/s (medians of 3 alternating pairs, 2 threads).
  int mmap = 0;
  int repack = 1;  // LoadOptions::pretile
};

int Bench(const BenchArgs& a) {
  auto f = gguf::File::Open(a.model, a.mmap ? MapMode::kMap : MapMode::kReadHuge);
  if (!f.ok()) return Fail(f.status());
  LoadOptions lo;
  lo.pretile = a.repack != 0;
  auto model = Model::Load(**f, lo);
  if (!model.ok()) return Fail(model.status());
  auto kv = ParseKvType(a.kv_type);
  if (!kv.ok()) return Fail(kv.status());
  const HParams& hp = (*model)->hparams();
  const int threads = ResolveThreads(a.threads);
  ThreadPool pool(threads);

  const DecodeFootprint fp = DecodeFootprintOf(**f, hp);
  const uint64_t size = fp.total_bytes;
  const int64_t params = fp.total_params;
  const bool moe = hp.n_expert > 0;  // the table gains an "active" column
  // Files without general.file_type are named by their first attention matrix's type.
  std::string ftype = FtypeName((*f)->GetUintOr("general.file_type", 99));
  if (ftype == "?")
    if (const auto* q = (*f)->FindTensor("blk.0.attn_q.weight")) {
      ftype.clear();
      for (char c : DTypeName(q->type)) ftype += static_cast<char>(std::toupper(c));
    }
  const std::string type = fmt::format("{} {} {}", hp.arch, SizeLabel(params), ftype);
  double bw = 0, roof_ts = 0;
  const uint64_t bytes_per_token = fp.active_bytes;
  if (a.roofline) {
    bw = MeasureTriadBandwidth(pool);
    roof_ts = bw / static_cast<double>(bytes_per_token);
  }

  BenchOptions o;
  o.n_prompt = a.n_prompt;
  o.n_gen = a.n_gen;
  o.reps = a.reps;
  o.warmup = !a.no_warmup;
  o.kv_type = *kv;
  auto tests = RunBench(**model, pool, o);
  if (!tests.ok()) return Fail(tests.status());

  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const BenchTest& t : *tests) {
      nlohmann::json j;
      j["build_commit"] = SHOAL_GIT_COMMIT;
      j["model_filename"] = a.model;
      j["model_type"] = type;
      j["model_size"] = size;
      j["model_n_params"] = params;
      j["model_n_params_active"] = fp.active_params;  // per decoded token (routed experts used)
      j["model_size_active"] = fp.active_bytes;
      j["backends"] = "CPU";
      j["n_threads"] = threads;
      j["type_k"] = a.kv_type;
      j["type_v"] = a.kv_type;
      j["n_prompt"] = t.n_prompt;
      j["n_gen"] = t.n_gen;
      j["avg_ts"] = t.avg_ts;
      j["stddev_ts"] = t.stddev_ts;
      j["samples_ts"] = t.samples_ts;
      std::vector<double> ns;
      const double n_tok = t.n_prompt + t.n_gen;
      for (double ts : t.samples_ts) ns.push_back(1e9 * n_tok / ts);
      j["samples_ns"] = ns;
      if (a.roofline && t.n_gen > 0) {
        j["mem_bw_gbs"] = bw / 1e9;
        j["bytes_per_token"] = bytes_per_token;
        j["roofline_ts"] = roof_ts;
        j["roofline_pct"] = 100.0 * t.avg_ts / roof_ts;
      }
      arr.push_back(j);
    }
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  fmt::print("| {:<30} | {:>10} | {:>10} |{} {:<7} | {:>7} | {:>12} | {:>20} |{}\n", "model",
             "size", "params", moe ? fmt::format(" {:>10} |", "active") : "", "backend", "threads",
             "test", "t/s", a.roofline ? " roofline |" : "");
  fmt::print("| {:-<30} | {:->9}: | {:->9}: |{} {:-<7} | {:->6}: | {:->11}: | {:->19}: |{}\n", "",
             "", "", moe ? " ---------: |" : "", "", "", "", "", a.roofline ? " -------: |" : "");
  for (const BenchTest& t : *tests) {
    const std::string test =
        t.n_prompt > 0 ? fmt::format("pp{}", t.n_prompt) : fmt::format("tg{}", t.n_gen);
    std::string roof;
    if (a.roofline)
      roof = t.n_gen > 0 ? fmt::format(" {:>7.1f}% |", 100 * t.avg_ts / roof_ts) : "          |";
    const std::string active =
        moe ? fmt::format(" {:>8.2f} M |", static_cast<double>(fp.active_params) / 1e6) : "";
    fmt::print(
        "| {:<30} | {:>6.2f} MiB | {:>8.2f} M |{} {:<7} | {:>7} | {:>12} | {:>12.2f} ± {:>5.2f} "
        "|{}\n",
        type, static_cast<double>(size) / (1 << 20), static_cast<double>(params) / 1e6, active,
        "CPU", threads, test, t.avg_ts, t.stddev_ts, roof);
  }
  if (moe)
    fmt::print(
        "\nexperts: {} routed of {} per token (+ {} shared); active {:.2f} M of {:.2f} M "
        "params, {:.2f} of {:.2f} MiB\n",
        hp.n_expert_used, hp.n_expert, hp.n_expert_shared,
        static_cast<double>(fp.active_params) / 1e6, static_cast<double>(params) / 1e6,
        static_cast<double>(fp.active_bytes) / (1 << 20), static_cast<double>(size) / (1 << 20));
  if (a.roofline) {
    fmt::print(
        "{}STREAM triad: {:.2f} GB/s ({} threads); decode reads {:.2f} MiB/token -> roofline "
        "{:.2f} t/s\n",
        moe ? "" : "\n", bw / 1e9, threads, static_cast<double>(bytes_per_token) / (1 << 20),
        roof_ts);
    if (moe)  // what reading every expert would allow: measured t/s above it proves sparsity
      fmt::print("reading all experts ({:.2f} MiB/token) would cap decode at {:.2f} t/s\n",
                 static_cast<double>(size) / (1 << 20), bw / static_cast<double>(size));
  }
  return 0;
}

}  // namespace

void AddBenchCommand(CLI::App& app, Runner* runner) {
  auto* cmd = app.add_subcommand("bench", "Measure prompt (pp) and generation (tg) throughput");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model file (required unless `serve` is given)");
  cmd->add_option("-p,--n-prompt", a->n_prompt, "Prompt tokens of the pp test (0 = skip)")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", a->n_gen, "Generated tokens of the tg test (0 = skip)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "Threads (0 = all cores)")->capture_default_str();
  cmd->add_option("-r,--repetitions", a->reps, "Repetitions of each test")->capture_default_str();
  cmd->add_option("--kv-type", a->kv_type, "KV cache type: f16 or f32")->capture_default_str();
  cmd->add_flag("--json", a->json, "Print a JSON array with llama-bench's field names");
  cmd->add_flag("--roofline", a->roofline,
                "Also measure memory bandwidth (STREAM triad) and print decode t/s as a "
                "percentage of bandwidth / bytes read per token");
  cmd->add_flag("--no-warmup", a->no_warmup, "Skip the untimed warm-up run of each test");
  cmd->add_option("--mmap,--mmp", a->mmap,
                  "1: mmap the model; 0: read it into transparent huge pages (fewer TLB misses)")
      ->check(CLI::IsMember({0, 1}))
      ->capture_default_str();
  cmd->add_option("--repack", a->repack,
                  "1: lay out Q4_0 matrices for the tiled kernels at load (held twice with "
                  "--mmap 0); 0: keep them as in the file")
      ->check(CLI::IsMember({0, 1}))
      ->capture_default_str();
  cmd->require_subcommand(0, 1);
  CLI::App* serve = AddBenchServeCommand(*cmd, runner);
  // CLI11 runs the `serve` callback first; it has set the runner then.
  cmd->callback([=] {
    if (serve->parsed()) return;
    if (a->model.empty()) throw CLI::RequiredError("--model");
    *runner = [=] { return Bench(*a); };
  });
}

}  // namespace shoal::cli
