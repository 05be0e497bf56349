// Per-request measurements and the benchmark report (vLLM benchmark_serving's metrics).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shoal::loadgen {

// What one request measured. Times in seconds from the moment the request was started (before
// connecting, as vLLM's client does).
struct RequestResult {
  bool ok = false;
  std::string error;           // why it failed
  int64_t prompt_tokens = -1;  // usage.prompt_tokens; -1 when the server sent no usage
  int64_t output_tokens = -1;  // usage.completion_tokens; -1 when the server sent no usage
  int64_t content_chunks = 0;  // SSE events that carried generated text
  double ttft = 0;             // first content chunk
  double latency = 0;          // end of the stream
  std::vector<double> itl;     // gaps between consecutive content chunks
};

// Output tokens of a request: the server's usage count, else the number of content chunks.
int64_t OutputTokens(const RequestResult& r);

// Time per output token after the first: (latency - ttft) / (output tokens - 1), vLLM's
// definition; false when the request produced fewer than two tokens.
bool Tpot(const RequestResult& r, double* tpot);

// The p-th percentile (0..100) with linear interpolation between closest ranks (numpy's
// default, which vLLM's report uses). Empty input gives 0.
double Percentile(std::vector<double> values, double p);

// Mean, median, p99 and population standard deviation, in milliseconds.
struct Distribution {
  double mean_ms = 0, median_ms = 0, p99_ms = 0, std_ms = 0;
};
Distribution Summarize(const std::vector<double>& seconds);

struct BenchReport {
  int64_t completed = 0;
  int64_t failed = 0;
  double duration_s = 0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double request_throughput = 0;      // completed requests / s
  double output_throughput = 0;       // output tokens / s
  double total_token_throughput = 0;  // (input + output tokens) / s
  Distribution ttft, tpot, itl, e2el;
  // The first kMaxErrors distinct failure messages with how often each occurred.
  std::vector<std::pair<std::string, int64_t>> errors;
  static constexpr size_t kMaxErrors = 5;
};

// Aggregates the successful requests. `estimated_prompt_tokens[i]` stands in for request i's
// prompt length when the server sent no usage.
BenchReport MakeReport(const std::vector<RequestResult>& results,
                       const std::vector<int64_t>& estimated_prompt_tokens, double duration_s);

// One JSON object with vLLM's field names (completed, duration, mean_ttft_ms, ...) plus failed
// and errors.
std::string ReportJson(const BenchReport& r);
// vLLM's human-readable table.
std::string ReportText(const BenchReport& r);

}  // namespace shoal::loadgen
