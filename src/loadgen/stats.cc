// Benchmark statistics and report formatting (see stats.h).
#include "loadgen/stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace shoal::loadgen {

int64_t OutputTokens(const RequestResult& r) {
  return r.output_tokens >= 0 ? r.output_tokens : r.content_chunks;
}

bool Tpot(const RequestResult& r, double* tpot) {
  const int64_t n = OutputTokens(r);
  if (n < 2) return false;
  *tpot = (r.latency - r.ttft) / static_cast<double>(n - 1);
  return true;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

Distribution Summarize(const std::vector<double>& seconds) {
  Distribution d;
  if (seconds.empty()) return d;
  double sum = 0;
  for (double s : seconds) sum += s;
  const double mean = sum / static_cast<double>(seconds.size());
  double var = 0;
  for (double s : seconds) var += (s - mean) * (s - mean);
  var /= static_cast<double>(seconds.size());
  d.mean_ms = 1e3 * mean;
  d.median_ms = 1e3 * Percentile(seconds, 50);
  d.p99_ms = 1e3 * Percentile(seconds, 99);
  d.std_ms = 1e3 * std::sqrt(var);
  return d;
}

BenchReport MakeReport(const std::vector<RequestResult>& results,
                       const std::vector<int64_t>& estimated_prompt_tokens, double duration_s) {
  BenchReport rep;
  rep.duration_s = duration_s;
  std::vector<double> ttfts, tpots, itls, e2els;
  for (size_t i = 0; i < results.size(); ++i) {
    const RequestResult& r = results[i];
    if (!r.ok) {
      ++rep.failed;
      auto it = std::find_if(rep.errors.begin(), rep.errors.end(),
                             [&](const auto& e) { return e.first == r.error; });
      if (it != rep.errors.end()) {
        ++it->second;
      } else if (rep.errors.size() < BenchReport::kMaxErrors) {
        rep.errors.emplace_back(r.error, 1);
      }
      continue;
    }
    ++rep.completed;
    const int64_t est = i < estimated_prompt_tokens.size() ? estimated_prompt_tokens[i] : 0;
    rep.total_input_tokens += r.prompt_tokens >= 0 ? r.prompt_tokens : est;
    rep.total_output_tokens += OutputTokens(r);
    ttfts.push_back(r.ttft);
    e2els.push_back(r.latency);
    itls.insert(itls.end(), r.itl.begin(), r.itl.end());
    double tpot;
    if (Tpot(r, &tpot)) tpots.push_back(tpot);
  }
  if (duration_s > 0) {
    rep.request_throughput = static_cast<double>(rep.completed) / duration_s;
    rep.output_throughput = static_cast<double>(rep.total_output_tokens) / duration_s;
    rep.total_token_throughput =
        static_cast<double>(rep.total_input_tokens + rep.total_output_tokens) / duration_s;
  }
  rep.ttft = Summarize(ttfts);
  rep.tpot = Summarize(tpots);
  rep.itl = Summarize(itls);
  rep.e2el = Summarize(e2els);
  return rep;
}

namespace {

void PutDistribution(nlohmann::json& j, const char* name, const Distribution& d) {
  j[fmt::format("mean_{}_ms", name)] = d.mean_ms;
  j[fmt::format("median_{}_ms", name)] = d.median_ms;
  j[fmt::format("std_{}_ms", name)] = d.std_ms;
  j[fmt::format("p99_{}_ms", name)] = d.p99_ms;
}

void AddDistribution(std::string& s, const char* title, const char* name, const Distribution& d) {
  s += fmt::format("{:-^50}\n", title);
  s += fmt::format("{:<40}{:<10.2f}\n", fmt::format("Mean {} (ms):", name), d.mean_ms);
  s += fmt::format("{:<40}{:<10.2f}\n", fmt::format("Median {} (ms):", name), d.median_ms);
  s += fmt::format("{:<40}{:<10.2f}\n", fmt::format("P99 {} (ms):", name), d.p99_ms);
}

}  // namespace

std::string ReportJson(const BenchReport& r) {
  nlohmann::json j;
  j["completed"] = r.completed;
  j["failed"] = r.failed;
  j["duration"] = r.duration_s;
  j["total_input_tokens"] = r.total_input_tokens;
  j["total_output_tokens"] = r.total_output_tokens;
  j["request_throughput"] = r.request_throughput;
  j["output_throughput"] = r.output_throughput;
  j["total_token_throughput"] = r.total_token_throughput;
  PutDistribution(j, "ttft", r.ttft);
  PutDistribution(j, "tpot", r.tpot);
  PutDistribution(j, "itl", r.itl);
  PutDistribution(j, "e2el", r.e2el);
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& [message, count] : r.errors)
    errors.push_back({{"message", message}, {"count", count}});
  j["errors"] = errors;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ReportText(const BenchReport& r) {
  std::string s = fmt::format("{:=^50}\n", " Serving Benchmark Result ");
  s += fmt::format("{:<40}{:<10}\n", "Successful requests:", r.completed);
  s += fmt::format("{:<40}{:<10}\n", "Failed requests:", r.failed);
  s += fmt::format("{:<40}{:<10.2f}\n", "Benchmark duration (s):", r.duration_s);
  s += fmt::format("{:<40}{:<10}\n", "Total input tokens:", r.total_input_tokens);
  s += fmt::format("{:<40}{:<10}\n", "Total generated tokens:", r.total_output_tokens);
  s += fmt::format("{:<40}{:<10.2f}\n", "Request throughput (req/s):", r.request_throughput);
  s += fmt::format("{:<40}{:<10.2f}\n", "Output token throughput (tok/s):", r.output_throughput);
  s +=
      fmt::format("{:<40}{:<10.2f}\n", "Total Token throughput (tok/s):", r.total_token_throughput);
  AddDistribution(s, "Time to First Token", "TTFT", r.ttft);
  AddDistribution(s, "Time per Output Token (excl. 1st token)", "TPOT", r.tpot);
  AddDistribution(s, "Inter-token Latency", "ITL", r.itl);
  AddDistribution(s, "End-to-end Latency", "E2EL", r.e2el);
  s += fmt::format("{:=^50}\n", "");
  for (const auto& [message, count] : r.errors)
    s += fmt::format("error ({}x): {}\n", count, message);
  return s;
}

}  // namespace shoal::loadgen
