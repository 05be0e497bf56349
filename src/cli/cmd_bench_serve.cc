// `shoal bench serve`: load generator for OpenAI-compatible servers (vLLM's benchmark_serving).
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "loadgen/runner.h"
#include "loadgen/stats.h"
#include "loadgen/workload.h"

namespace shoal::cli {
namespace {

struct ServeArgs {
  loadgen::ServeBenchOptions o;
  std::string request_rate = "inf", dataset;
  int64_t num_prompts = 200, input_len = 256, output_len = 128;
  uint64_t seed = 0;
  bool json = false;
};

constexpr const char* kDescription =
    R"(Benchmark an OpenAI-compatible server (vLLM's benchmark_serving).

Sends --num-prompts streaming requests ("stream": true with usage, max_tokens = output length,
ignore_eos) from one thread over HTTP/1.1, arriving as a Poisson process of --request-rate
requests/s (or all at once with inf), at most --max-concurrency in flight. Prompts are random
words (--input-len words ~ tokens; the server's usage.prompt_tokens is reported) or the lines
of --dataset, a JSONL file of {"prompt": "...", "output_len": N} objects (output_len optional,
default --output-len; lines are reused in order when there are fewer than --num-prompts).

Reports successful and failed requests (with the first error messages), duration, tokens,
request / output / total token throughput and mean, median and p99 of TTFT, TPOT
((latency - TTFT) / (output tokens - 1)), ITL (gaps between content chunks) and end-to-end
latency in ms. Exits 1 when no request succeeded.
)";

Result<double> ParseRate(const std::string& s) {
  if (s == "inf" || s == "INF" || s == "infinity") return std::numeric_limits<double>::infinity();
  char* end = nullptr;
  const double r = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(r > 0) || std::isinf(r))
    return Errorf("--request-rate {}: expected a positive number of requests/s or inf", s);
  return r;
}

int BenchServe(const ServeArgs& a) {
  auto rate = ParseRate(a.request_rate);
  if (!rate.ok()) return Fail(rate.status());
  if (a.num_prompts < 1) return Fail(Errorf("--num-prompts must be at least 1"));
  if (a.output_len < 1 || a.input_len < 0)
    return Fail(Errorf("--output-len must be at least 1 and --input-len at least 0"));
  if (!(a.o.request_timeout_s > 0) || !(a.o.total_timeout_s > 0))
    return Fail(Errorf("--timeout and --total-timeout must be positive"));
  std::vector<loadgen::RequestSpec> requests;
  if (!a.dataset.empty()) {
    auto d = loadgen::LoadDataset(a.dataset, a.num_prompts, a.output_len);
    if (!d.ok()) return Fail(d.status());
    requests = std::move(*d);
  } else {
    requests = loadgen::SyntheticRequests(a.num_prompts, a.input_len, a.output_len, a.seed);
  }
  const std::vector<double> arrivals = loadgen::ArrivalOffsets(a.num_prompts, *rate, a.seed);
  RaiseFileLimit();
  if (!a.json)
    std::fprintf(
        stderr, "%lld requests to %s (%s), request rate %s, max concurrency %s\n",
        static_cast<long long>(a.num_prompts), a.o.url.c_str(), a.o.endpoint.c_str(),
        a.request_rate.c_str(),
        a.o.max_concurrency > 0 ? std::to_string(a.o.max_concurrency).c_str() : "unlimited");
  auto run = loadgen::RunServeBench(a.o, requests, arrivals);
  if (!run.ok()) return Fail(run.status());
  std::vector<int64_t> estimates;
  for (const auto& r : requests) estimates.push_back(r.prompt_tokens);
  const loadgen::BenchReport report = loadgen::MakeReport(run->results, estimates, run->duration_s);
  if (a.json) {
    std::printf("%s\n", loadgen::ReportJson(report).c_str());
  } else {
    std::printf("model: %s\n%s", run->model.c_str(), loadgen::ReportText(report).c_str());
  }
  return report.completed > 0 ? 0 : 1;
}

}  // namespace

CLI::App* AddBenchServeCommand(CLI::App& bench, Runner* runner) {
  auto* cmd = bench.add_subcommand("serve", "Benchmark an OpenAI-compatible server over HTTP");
  cmd->footer(kDescription);
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("--url", a->o.url, "Server base URL: http://host:port[/prefix]")->required();
  cmd->add_option("--model", a->o.model,
                  "Model name sent in requests (default: the first of GET /v1/models)");
  cmd->add_option("--api-key", a->o.api_key, "Sent as 'Authorization: Bearer KEY'");
  cmd->add_option("--endpoint", a->o.endpoint, "/v1/completions or /v1/chat/completions")
      ->capture_default_str();
  cmd->add_option("-n,--num-prompts", a->num_prompts, "Requests to send")->capture_default_str();
  cmd->add_option("--request-rate", a->request_rate,
                  "Requests/s of the Poisson arrivals, or inf to send all at once")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", a->o.max_concurrency,
                  "Requests in flight at most (0 = no limit)")
      ->capture_default_str();
  auto* input = cmd->add_option("--input-len", a->input_len, "Words (~tokens) per synthetic prompt")
                    ->capture_default_str();
  cmd->add_option("--output-len", a->output_len,
                  "max_tokens of each request (dataset lines may set their own)")
      ->capture_default_str();
  cmd->add_option("--dataset", a->dataset,
                  "JSONL file: one {\"prompt\": ..., \"output_len\": N} per line")
      ->excludes(input);
  cmd->add_option("--seed", a->seed, "Seed of prompts and arrival times")->capture_default_str();
  cmd->add_option("--timeout", a->o.request_timeout_s, "Per-request timeout in seconds")
      ->capture_default_str();
  cmd->add_option("--total-timeout", a->o.total_timeout_s,
                  "Bound on the whole run in seconds (unfinished requests fail)")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print one JSON object (vLLM's field names)");
  cmd->callback([=] { *runner = [=] { return BenchServe(*a); }; });
  return cmd;
}

}  // namespace shoal::cli
