// The OpenAI-compatible server: routes, auth, queue limits, health, metrics and graceful
// shutdown over an HttpServer and an EngineLoop.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/engine_loop.h"
#include "server/generation_job.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/served_model.h"
#include "server/work_pool.h"

namespace shoal::server {

struct ServerConfig {
  HttpServerOptions http;
  std::string api_key;  // "" = no authentication
  // The cluster's admin credential: the only key that may drain, join or rebalance nodes.
  // "" = those endpoints answer 403 (cluster control is off on this listener).
  std::string admin_key;
  std::string served_model_name;
  int64_t max_queued_requests = 4096;   // requests with no token yet; more get 429
  int64_t max_queued_sequences = 4096;  // their sequences (prompts x n); more get 429
  int drain_timeout_s = 30;             // SIGTERM: in-flight requests get this long to finish
  // A stream whose client has not taken this many bytes is paused (its sequences stop being
  // scheduled) until it reads again. 1 MiB is ~4,000 token chunks: far beyond a reading
  // client's lag, small beside the 300+ MiB one stalled client could pile up unbounded.
  size_t stream_buffer_bytes = 1 << 20;
  // A stream paused this long is aborted and its connection dropped (its memory freed).
  int stream_stall_timeout_s = 30;
  // Threads for JSON parsing, chat templates and tokenizing, off the io thread. Two keep one
  // 8 MiB tokenize from delaying every other request, without taking cores from the engine.
  int work_threads = 2;
  // Requests waiting for a work thread, and their bodies' bytes; more get 429 at once. 4096
  // takes a burst of 1,000+ clients at once; 256 MiB bounds the bodies held (32 x 8 MiB).
  size_t max_work_queued = 4096;
  size_t max_work_queued_bytes = 256 << 20;
};

class Server {
 public:
  explicit Server(ServerConfig cfg);
  ~Server();

  // Binds the port; /health answers 503 until SetReady.
  Status Listen();
  int port() const { return http_->port(); }
  // Thread-safe: the model is loaded; start serving.
  void SetReady(ServedModel model);
  // Thread-safe: load failed; the server exits Run with this status.
  void SetFailed(Status s);
  // Runs until a graceful shutdown (SIGTERM/SIGINT or Shutdown()) completes.
  Status Run();
  // Thread-safe: begins the graceful shutdown.
  void Shutdown();

 private:
  void Handle(const HttpRequest& req, std::shared_ptr<HttpExchange> ex);
  // Checks the credential a path needs; false after answering 401/403.
  bool Authorized(const std::string& path, const HttpRequest& req, HttpExchange& ex) const;
  // Runs `work` on a work thread; the continuation it returns runs on the io thread. A task
  // that throws answers 500; a full queue answers 429 at once.
  void Offload(std::shared_ptr<HttpExchange> ex, size_t bytes,
               std::function<std::function<void()>()> work);
  void HandleGeneration(const HttpRequest& req, std::shared_ptr<HttpExchange> ex, bool chat);
  // Io thread, after parsing: admission (queue limits) and submission to the engine.
  void SubmitGeneration(std::shared_ptr<GenerationRequest> g, std::shared_ptr<HttpExchange> ex);
  // Every second: streams paused longer than stream_stall_timeout_s are dropped.
  void CheckStalledStreams();
  void Forget(const std::shared_ptr<GenerationJob>& job);
  void HandleModels(const HttpRequest& req, std::shared_ptr<HttpExchange> ex);
  void HandleCluster(std::shared_ptr<HttpExchange> ex);
  // POST /v1/cluster/drain, /join and /rebalance.
  void HandleMembership(const std::string& path, const HttpRequest& req,
                        std::shared_ptr<HttpExchange> ex);
  void OnEvents(std::vector<LoopEvent> events);  // io thread
  void BeginDrain();
  // Ends the engine thread (stopping a pipeline's recovery first) and drops the engine.
  void StopEngine();
  void MaybeFinishDrain();
  static void SendError(HttpExchange& ex, const ApiError& e, const Headers& extra = {});

  ServerConfig cfg_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<WorkPool> pool_;  // after http_: its threads end first (they post to http_)
  std::unique_ptr<Metrics> metrics_;
  // Io thread state.
  ServedModel model_;
  std::unique_ptr<EngineLoop> loop_;
  bool ready_ = false, draining_ = false;
  Status failed_;
  JobContext job_ctx_;
  std::unordered_map<uint64_t, std::shared_ptr<GenerationJob>> by_ticket_;
  std::unordered_map<GenerationJob*, std::shared_ptr<GenerationJob>> jobs_;
  int64_t created_ = 0;
};

}  // namespace shoal::server
