// `shoal router`: the OpenAI-compatible front door over several replicas (each a `shoal serve`,
// single-process or a cluster's coordinator). It answers /health, /metrics and /v1/cluster
// itself and forwards /v1/* to the replica ReplicaSet picks (prefix affinity bounded by load),
// relaying the answer as it streams; a replica that refuses, fails before answering, or answers
// 5xx gets the request retried on another; all replicas full: 429; none up: 503.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "loadgen/http_client.h"
#include "router/replica_set.h"
#include "server/http.h"

namespace shoal::router {

struct RouterConfig {
  server::HttpServerOptions http;
  std::vector<std::string> replicas;  // http://host:port[/prefix]
  std::string api_key;                // what clients must send ("" = none)
  std::string replica_api_key;        // what the router sends to the replicas
  Policy policy = Policy::kAffinity;
  // Requests in flight per replica before it counts as full. 64 matches `shoal serve`'s default
  // --max-num-seqs: more would only queue inside the replica, where no other replica can take it.
  int64_t max_in_flight = 64;
  // Affinity yields to the least busy replica when the chosen one has this many more requests in
  // flight: 4 is a few decode steps' worth of waiting, less than a cold prefix's prefill.
  int64_t slack = 4;
  // Prompt bytes that key the affinity: 512 bytes is ~128 tokens, 8 KV blocks of 16.
  size_t affinity_bytes = 512;
  int health_interval_ms = 1000;
  int idle_timeout_s = 600;  // a replica silent this long on a request fails it
  // A client that has not taken this many bytes of its answer is dropped (and its request
  // cancelled at the replica): 8 MiB is ~30,000 token chunks, far past any live reader's lag.
  size_t max_buffered_bytes = 8 << 20;
  int drain_timeout_s = 30;  // SIGTERM: requests in flight get this long
};

class Router {
 public:
  explicit Router(RouterConfig cfg);
  ~Router();
  // Resolves the replicas and binds the port.
  Status Listen();
  int port() const;
  // Serves until SIGTERM/SIGINT (then drains) or Shutdown().
  Status Run();
  void Shutdown();

  struct Forwarding;  // one request on its way (router.cc)

 private:
  void Handle(const server::HttpRequest& req, std::shared_ptr<server::HttpExchange> ex);
  void Forward(std::shared_ptr<Forwarding> f);
  void Finish(std::shared_ptr<Forwarding> f, int replica, Status s);
  // A streamed generation with one choice keeps a journal (StartJournal asks the replica for
  // each token's id and fixes the seed); Relay passes the answer on, event by event, noting
  // the tokens and text the client has; Cut ends an answer that cannot go on.
  void StartJournal(Forwarding& f);
  void Relay(Forwarding& f, std::string data);
  void Cut(Forwarding& f, const std::string& why);
  void CheckHealth();
  // HttpServer::Post with every exception caught (logged) instead of ending the io loop.
  void Post(std::function<void()> fn);
  void MarkUp(int i, bool up);  // logs a change
  std::string Metrics() const;
  std::string ClusterJson() const;

  RouterConfig cfg_;
  std::unique_ptr<server::HttpServer> http_;
  ReplicaSet set_;
  std::vector<std::shared_ptr<const loadgen::HttpTarget>> targets_;
  boost::asio::io_context client_io_;
  std::thread client_thread_;
  int64_t rejected_ = 0, unavailable_ = 0, retries_ = 0, resumed_ = 0, cut_ = 0;
  bool draining_ = false;
};

}  // namespace shoal::router
