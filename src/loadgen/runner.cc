// Benchmark driver: Poisson arrivals, a concurrency cap and one io_context (see runner.h).
#include "loadgen/runner.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <utility>

#include "loadgen/http_client.h"
#include "loadgen/openai_stream.h"

namespace shoal::loadgen {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// 30 s: GET /v1/models is answered at once by any live server.
constexpr double kModelsTimeoutS = 30;

Clock::duration Seconds(double s) {
  // Clamp: a year is "forever" and keeps time_point arithmetic far from overflow.
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::min(s, 365.0 * 86400)));
}

class Driver {
 public:
  Driver(const ServeBenchOptions& o, std::shared_ptr<const HttpTarget> target,
         std::vector<std::string> bodies, const std::vector<double>& arrivals)
      : o_(o),
        target_(std::move(target)),
        bodies_(std::move(bodies)),
        arrivals_(arrivals),
        results_(bodies_.size()) {}

  std::vector<RequestResult> Run() {
    start_ = Clock::now();
    total_deadline_ = start_ + Seconds(o_.total_timeout_s);
    asio::co_spawn(io_, Arrive(), asio::detached);
    io_.run();
    return std::move(results_);
  }

 private:
  // Queues each request at its arrival time.
  asio::awaitable<void> Arrive() {
    asio::steady_timer timer(io_);
    for (size_t i = 0; i < bodies_.size(); ++i) {
      const Clock::time_point at = start_ + Seconds(arrivals_[i]);
      if (at >= total_deadline_) {
        for (size_t j = i; j < bodies_.size(); ++j) NotSent(j);
        co_return;
      }
      if (at > Clock::now()) {
        timer.expires_at(at);
        boost::system::error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      queue_.push_back(i);
      Dispatch();
    }
  }

  // Starts queued requests while the concurrency cap allows.
  void Dispatch() {
    while (!queue_.empty() && (o_.max_concurrency <= 0 || in_flight_ < o_.max_concurrency)) {
      const size_t i = queue_.front();
      queue_.pop_front();
      const Clock::time_point now = Clock::now();
      if (now >= total_deadline_) {
        NotSent(i);
        continue;
      }
      StreamRequest req;
      req.path = o_.endpoint;
      req.body = std::move(bodies_[i]);
      req.api_key = o_.api_key;
      req.deadline = now + Seconds(o_.request_timeout_s);
      req.deadline_error = fmt::format("timed out after {} s (--timeout)", o_.request_timeout_s);
      if (req.deadline > total_deadline_) {
        req.deadline = total_deadline_;
        req.deadline_error = fmt::format("stopped by the total timeout of {} s (--total-timeout)",
                                         o_.total_timeout_s);
      }
      ++in_flight_;
      StartStreamRequest(io_, target_, std::move(req), [this, i](RequestResult r) {
        results_[i] = std::move(r);
        --in_flight_;
        Dispatch();
      });
    }
  }

  void NotSent(size_t i) {
    results_[i].error = fmt::format("not sent before the total timeout of {} s (--total-timeout)",
                                    o_.total_timeout_s);
  }

  const ServeBenchOptions& o_;
  std::shared_ptr<const HttpTarget> target_;
  std::vector<std::string> bodies_;
  const std::vector<double>& arrivals_;
  std::vector<RequestResult> results_;
  asio::io_context io_{1};  // concurrency hint 1: one thread runs it, no locking needed
  Clock::time_point start_, total_deadline_;
  std::deque<size_t> queue_;  // arrived, waiting for a free slot
  int64_t in_flight_ = 0;
};

}  // namespace

Result<ServeBenchRun> RunServeBench(const ServeBenchOptions& o,
                                    const std::vector<RequestSpec>& requests,
                                    const std::vector<double>& arrivals) {
  if (arrivals.size() != requests.size())
    return Errorf("{} arrival times for {} requests", arrivals.size(), requests.size());
  SHOAL_ASSIGN_OR_RETURN(const Url url, ParseUrl(o.url));
  SHOAL_ASSIGN_OR_RETURN(HttpTarget target, ResolveTarget(url));
  ServeBenchRun run;
  run.model = o.model;
  if (run.model.empty()) {
    SHOAL_ASSIGN_OR_RETURN(run.model, FetchFirstModelId(target, o.api_key, kModelsTimeoutS));
  }
  const ApiKind kind = ApiKindOf(o.endpoint);
  std::vector<std::string> bodies;
  bodies.reserve(requests.size());
  for (const RequestSpec& r : requests)
    bodies.push_back(RequestBody(kind, run.model, r.prompt, r.output_len));
  Driver driver(o, std::make_shared<const HttpTarget>(std::move(target)), std::move(bodies),
                arrivals);
  const Clock::time_point start = Clock::now();
  run.results = driver.Run();
  run.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  return run;
}

}  // namespace shoal::loadgen
