// Asynchronous HTTP/1.1 client for one streaming (SSE) completion request, on Boost.Beast.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
#include <vector>

#include "base/status.h"
#include "loadgen/stats.h"
#include "loadgen/url.h"

namespace shoal::loadgen {

using SteadyTime = std::chrono::steady_clock::time_point;

// A server resolved once before the benchmark, so name lookups are not measured.
struct HttpTarget {
  std::string host_header;  // "host:port"
  std::string path_prefix;  // prepended to every request path
  std::vector<boost::asio::ip::tcp::endpoint> endpoints;
};

// Resolves the URL's host (blocking; called once before the run).
Result<HttpTarget> ResolveTarget(const Url& url);

struct StreamRequest {
  std::string path;            // endpoint, e.g. "/v1/completions" (the target's prefix goes first)
  std::string body;            // JSON
  std::string api_key;         // sent as "Authorization: Bearer <key>" when not empty
  SteadyTime deadline;         // connection closed and the request failed when reached
  std::string deadline_error;  // the failure message then
};

// Starts one request on `io` (which must be run by one thread): connect, POST, read the SSE
// stream, timestamping each content chunk. `done` is called on that thread exactly once with the
// outcome; every failure (refused connection, HTTP status, timeout, malformed stream) is a
// result with ok = false and a message, never an exception.
void StartStreamRequest(boost::asio::io_context& io, std::shared_ptr<const HttpTarget> target,
                        StreamRequest request, std::function<void(RequestResult)> done);

// GET <prefix><path>: the body of a 200 answer (else an error with the status and the start of
// the body). Blocking, bounded by timeout_s.
Result<std::string> HttpGet(const HttpTarget& target, const std::string& path,
                            const std::string& api_key, double timeout_s);

// POST <prefix><path> with a JSON body: the body of a 200 answer (else an error). Blocking.
Result<std::string> HttpPost(const HttpTarget& target, const std::string& path,
                             const std::string& body, const std::string& api_key, double timeout_s);

// GET <prefix>/v1/models and return the first model's id (what vLLM's benchmark does when no
// model is named). Blocking, bounded by timeout_s.
Result<std::string> FetchFirstModelId(const HttpTarget& target, const std::string& api_key,
                                      double timeout_s);

}  // namespace shoal::loadgen
