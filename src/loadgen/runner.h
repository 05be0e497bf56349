// `shoal bench serve`'s engine: sends a workload to an OpenAI-compatible server and measures it.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/status.h"
#include "loadgen/stats.h"
#include "loadgen/workload.h"

namespace shoal::loadgen {

struct ServeBenchOptions {
  std::string url;                           // http://host:port[/prefix]
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;                         // empty: the first of GET /v1/models
  std::string api_key;
  int64_t max_concurrency = 0;  // requests in flight at most; 0 = no limit
  // 600 s: a 2,000-token generation at 5 tokens/s on a loaded CPU server still fits.
  double request_timeout_s = 600;
  // 3,600 s: an hour bounds any run; requests not finished by then fail.
  double total_timeout_s = 3600;
};

struct ServeBenchRun {
  std::string model;                   // the model named in the requests
  std::vector<RequestResult> results;  // one per request, in workload order
  double duration_s = 0;               // from the first send to the last completion
};

// Runs the workload: request i is sent at arrivals[i] seconds after the start (or later, when
// max_concurrency requests are already in flight: it then waits in arrival order). All
// connections are driven by one io_context on the calling thread. Errors: a bad URL, an
// unresolvable host, no model to name; failed requests are results, not errors.
Result<ServeBenchRun> RunServeBench(const ServeBenchOptions& o,
                                    const std::vector<RequestSpec>& requests,
                                    const std::vector<double>& arrivals);

}  // namespace shoal::loadgen
