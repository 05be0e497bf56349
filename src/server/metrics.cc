// Metrics: histograms and the Prometheus text rendering.
#include "server/metrics.h"

#include <fmt/format.h>

namespace shoal::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& labels, std::string* out) const {
  int64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const std::string le = i < bounds_.size() ? fmt::format("{}", bounds_[i]) : "+Inf";
    *out += fmt::format("{}_bucket{{le=\"{}\",{}}} {}\n", name, le, labels, cum);
  }
  *out += fmt::format("{}_sum{{{}}} {}\n", name, labels, sum_);
  *out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
}

// Bucket bounds (seconds) are vLLM's, so percentile panels line up with vLLM deployments.
Metrics::Metrics(std::string model_name)
    : model_(std::move(model_name)),
      ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
             1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      itl_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
            20.0, 40.0, 80.0}),
      e2e_({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
            30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}) {
  for (const char* r : {"stop", "length", "abort"}) success_[r] = 0;
}

void Metrics::AddPromptTokens(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  prompt_tokens_ += n;
}
void Metrics::AddGenerationTokens(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  generation_tokens_ += n;
}
void Metrics::RequestFinished(const std::string& reason) {
  std::lock_guard<std::mutex> lk(mu_);
  ++success_[reason];
}
void Metrics::ObserveTtft(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  ttft_.Observe(s);
}
void Metrics::ObserveItl(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  itl_.Observe(s);
}
void Metrics::ObserveE2e(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  e2e_.Observe(s);
}

namespace {

// A Prometheus label value: backslash, quote and newline escaped.
std::string LabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string Metrics::Render(const EngineStats& es, int64_t waiting_extra,
                            std::span<const StageMetrics> stages) const {
  std::lock_guard<std::mutex> lk(mu_);
  const std::string lab = fmt::format("model_name=\"{}\"", model_);
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  auto sample = [&](const char* name, auto value) {
    out += fmt::format("{}{{{}}} {}\n", name, lab, value);
  };
  family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
  sample("vllm:num_requests_running", es.n_running);
  family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  sample("vllm:num_requests_waiting", es.n_waiting + waiting_extra);
  family("vllm:num_requests_swapped", "gauge", "Number of requests swapped to CPU memory.");
  sample("vllm:num_requests_swapped", es.n_swapped);
  family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  sample("vllm:kv_cache_usage_perc", es.kv_usage);
  family("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  sample("vllm:prompt_tokens_total", prompt_tokens_);
  family("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
  sample("vllm:generation_tokens_total", generation_tokens_);
  family("vllm:request_success_total", "counter", "Count of successfully processed requests.");
  for (const auto& [reason, n] : success_)
    out +=
        fmt::format("vllm:request_success_total{{finished_reason=\"{}\",{}}} {}\n", reason, lab, n);
  family("vllm:num_preemptions_total", "counter", "Cumulative number of preemptions.");
  sample("vllm:num_preemptions_total", es.preemptions_total);
  family("vllm:prefix_cache_queries_total", "counter",
         "Prefix cache queries, in terms of number of queried tokens.");
  sample("vllm:prefix_cache_queries_total", es.prefix_queries_total);
  family("vllm:prefix_cache_hits_total", "counter",
         "Prefix cache hits, in terms of number of cached tokens.");
  sample("vllm:prefix_cache_hits_total", es.prefix_hits_total);
  family("vllm:time_to_first_token_seconds", "histogram", "Histogram of time to first token.");
  ttft_.Render("vllm:time_to_first_token_seconds", lab, &out);
  family("vllm:inter_token_latency_seconds", "histogram", "Histogram of inter-token latency.");
  itl_.Render("vllm:inter_token_latency_seconds", lab, &out);
  family("vllm:e2e_request_latency_seconds", "histogram",
         "Histogram of end-to-end request latency.");
  e2e_.Render("vllm:e2e_request_latency_seconds", lab, &out);
  if (stages.empty()) return out;
  const int32_t window = stages.front().window_s;
  auto per_stage = [&](const char* name, const char* type, const std::string& help, auto get) {
    family(name, type, help.c_str());
    for (const StageMetrics& st : stages)
      out += fmt::format("{}{{{},stage=\"{}\",node=\"{}\"}} {}\n", name, lab, st.stage,
                         LabelValue(st.node), get(st));
  };
  per_stage("shoal_stage_busy_fraction", "gauge",
            fmt::format("Fraction of the last {} s a pipeline stage spent computing.", window),
            [](const StageMetrics& st) { return st.busy_fraction; });
  per_stage("shoal_stage_tokens_per_second", "gauge",
            fmt::format("Tokens a pipeline stage computed per second over the last {} s.", window),
            [](const StageMetrics& st) { return st.tokens_per_s; });
  per_stage("shoal_stage_busy_seconds_total", "counter",
            "Seconds a pipeline stage spent computing.",
            [](const StageMetrics& st) { return st.busy_seconds_total; });
  per_stage("shoal_stage_tokens_total", "counter", "Tokens a pipeline stage computed.",
            [](const StageMetrics& st) { return st.tokens_total; });
  return out;
}

}  // namespace shoal::server
