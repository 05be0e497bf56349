// Server: request routing and the lifecycle (loading -> ready -> draining -> stopped).
#include "server/server.h"

#include <malloc.h>

#include <chrono>

#include "base/clock.h"
#include "base/log.h"
#include "base/process_memory.h"
#include "server/bearer.h"
#include "server/cluster_view.h"
#include "server/tokenize_route.h"

namespace shoal::server {

namespace {

constexpr const char* kJson = "application/json";

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Endpoints that change the cluster: only the admin credential opens them.
bool IsClusterControl(const std::string& path) {
  return path == "/v1/cluster/drain" || path == "/v1/cluster/join" ||
         path == "/v1/cluster/rebalance";
}

}  // namespace

Server::Server(ServerConfig cfg) : cfg_(std::move(cfg)) {
  http_ = std::make_unique<HttpServer>(
      cfg_.http,
      [this](const HttpRequest& r, std::shared_ptr<HttpExchange> ex) { Handle(r, std::move(ex)); });
  metrics_ = std::make_unique<Metrics>(cfg_.served_model_name);
  pool_ = std::make_unique<WorkPool>(cfg_.work_threads, cfg_.max_work_queued,
                                     cfg_.max_work_queued_bytes);
  created_ = UnixNow();
}

Server::~Server() {
  pool_.reset();  // its tasks post to the io thread
  StopEngine();   // joins the engine thread before the io objects go away
}

Status Server::Listen() {
  SHOAL_RETURN_IF_ERROR(http_->Listen());
  http_->OnSignal([this](int sig) {
    Log(LogLevel::kInfo, "signal {}: draining", sig);
    BeginDrain();
  });
  return Status::Ok();
}

void Server::SetReady(ServedModel model) {
  auto shared = std::make_shared<ServedModel>(std::move(model));
  http_->Post([this, shared] {
    model_ = std::move(*shared);
    job_ctx_.tokenizer = model_.tokenizer;
    job_ctx_.eog = model_.eog;
    job_ctx_.metrics = metrics_.get();
    loop_ = std::make_unique<EngineLoop>(
        std::move(model_.engine), [this](std::vector<LoopEvent> events) {
          auto ev = std::make_shared<std::vector<LoopEvent>>(std::move(events));
          http_->Post([this, ev] { OnEvents(std::move(*ev)); });
        });
    EngineLoop* loop = loop_.get();
    job_ctx_.cancel = [loop](uint64_t t) { loop->Cancel(t); };
    job_ctx_.cancel_choice = [loop](uint64_t t, int32_t i) { loop->CancelChoice(t, i); };
    job_ctx_.hold = [loop](uint64_t t, bool held) { loop->Hold(t, held); };
    job_ctx_.stream_buffer_bytes = cfg_.stream_buffer_bytes;
    ready_ = !draining_;
    http_->After(1000, [this] { CheckStalledStreams(); });
    Log(LogLevel::kInfo, "serving '{}' on {}:{}", model_.info.name, cfg_.http.host, port());
  });
}

void Server::SetFailed(Status s) {
  http_->Post([this, s] {
    failed_ = s;
    http_->Stop();
  });
}

Status Server::Run() {
  http_->Run();
  StopEngine();
  return failed_;
}

void Server::StopEngine() {
  // A pipeline that is re-planning (no plan fits the live nodes) gives up first, so the
  // engine thread waiting in it can be joined. The cluster is the engine's executor: it goes
  // with the loop.
  if (loop_ && model_.cluster) model_.cluster->Stop();
  loop_.reset();
  model_.cluster = nullptr;
}

void Server::Shutdown() {
  http_->Post([this] { BeginDrain(); });
}

void Server::BeginDrain() {
  if (draining_) return;
  draining_ = true;
  ready_ = false;
  http_->StopAccepting();
  MaybeFinishDrain();
  http_->After(cfg_.drain_timeout_s * 1000, [this] {
    // Time is up: cancel what is left; streams end, waiting clients get 503.
    std::vector<std::shared_ptr<GenerationJob>> left;
    for (auto& [p, j] : jobs_) left.push_back(j);
    for (auto& j : left) j->Abort();
    jobs_.clear();
    by_ticket_.clear();
    MaybeFinishDrain();
  });
}

void Server::MaybeFinishDrain() {
  if (!draining_ || !jobs_.empty()) return;
  // Give the last responses a moment to flush (100 ms is far above a loopback write).
  http_->After(100, [this] { http_->Stop(); });
}

void Server::SendError(HttpExchange& ex, const ApiError& e, const Headers& extra) {
  ex.Respond(e.status, kJson, e.ToJson(), extra);
}

void Server::Handle(const HttpRequest& req, std::shared_ptr<HttpExchange> ex) {
  const std::string& path = req.target;
  if (path == "/health") {
    if (ready_) {
      ex->Respond(200, kJson, R"({"status":"ok"})");
    } else {
      ex->Respond(503, kJson, draining_ ? R"({"status":"draining"})" : R"({"status":"loading"})");
    }
    return;
  }
  if (path == "/metrics") {
    const EngineStats es = loop_ ? loop_->stats() : EngineStats{};
    std::vector<StageMetrics> stages;
    if (ready_ && model_.cluster) stages = StageMetricsOf(*model_.cluster);
    std::string text = metrics_->Render(es, loop_ ? loop_->n_pending() : 0, stages);
    if (ready_ && model_.cluster) text += FailoverMetrics(model_.cluster->stats());
    ex->Respond(200, "text/plain; version=0.0.4; charset=utf-8", text);
    return;
  }
  if (!Authorized(path, req, *ex)) return;
  const bool known = path == "/v1/completions" || path == "/v1/chat/completions" ||
                     path == "/tokenize" || path == "/detokenize" || path == "/v1/models" ||
                     path == "/v1/cluster" || IsClusterControl(path) ||
                     path.rfind("/v1/models/", 0) == 0;
  if (!known) {
    SendError(*ex, ApiError::NotFound(path));
    return;
  }
  const bool is_get = path.rfind("/v1/models", 0) == 0 || path == "/v1/cluster";
  if ((is_get && req.method != "GET") || (!is_get && req.method != "POST")) {
    SendError(*ex, ApiError::MethodNotAllowed(req.method, path));
    return;
  }
  if (!ready_) {
    SendError(*ex,
              ApiError::Unavailable(draining_ ? "the server is shutting down"
                                              : "the model is still loading"),
              {{"Retry-After", "1"}});
    return;
  }
  if (path == "/v1/completions") return HandleGeneration(req, std::move(ex), false);
  if (path == "/v1/chat/completions") return HandleGeneration(req, std::move(ex), true);
  if (path == "/tokenize" || path == "/detokenize") {
    const ModelInfo* info = &model_.info;  // fixed once ready; read-only on the work thread
    return Offload(ex, req.body.size(),
                   [ex, info, tokenize = path == "/tokenize", body = req.body] {
                     auto r = std::make_shared<RouteReply>(tokenize ? TokenizeReply(body, *info)
                                                                    : DetokenizeReply(body, *info));
                     return std::function<void()>(
                         [ex, r] { ex->Respond(r->status, kJson, std::move(r->body)); });
                   });
  }
  if (path == "/v1/cluster") return HandleCluster(std::move(ex));
  if (IsClusterControl(path)) return HandleMembership(path, req, std::move(ex));
  return HandleModels(req, std::move(ex));
}

void Server::HandleMembership(const std::string& path, const HttpRequest& req,
                              std::shared_ptr<HttpExchange> ex) {
  if (!model_.cluster) return SendError(*ex, ApiError::BadRequest("this server is not a cluster"));
  auto body = ParseJsonObject(req.body.empty() ? "{}" : req.body);
  if (!body.ok()) return SendError(*ex, ApiError::BadRequest(body.status().message()));
  if (path == "/v1/cluster/rebalance") {
    model_.cluster->Rebalance();
    return ex->Respond(200, kJson, DumpJson(Json{{"rebalancing", true}}));
  }
  auto node = GetString(*body, "node");
  if (!node.ok() || !node->has_value())
    return SendError(*ex, ApiError::BadRequest("'node' (a name or address) is required", "node"));
  if (path == "/v1/cluster/drain") {
    if (Status s = model_.cluster->Drain(**node); !s.ok())
      return SendError(*ex, ApiError::BadRequest(s.message(), "node"));
    return ex->Respond(200, kJson, DumpJson(Json{{"draining", **node}}));
  }
  auto standby = GetBool(*body, "standby");
  if (!standby.ok()) return SendError(*ex, ApiError::BadRequest(standby.status().message()));
  const bool as_standby = standby->value_or(false);
  if (Status s = model_.cluster->Join(**node, as_standby); !s.ok())
    return SendError(*ex, ApiError::BadRequest(s.message(), "node"));
  return ex->Respond(200, kJson, DumpJson(Json{{"joined", **node}, {"standby", as_standby}}));
}

void Server::HandleModels(const HttpRequest& req, std::shared_ptr<HttpExchange> ex) {
  Json m = {{"id", model_.info.name},
            {"object", "model"},
            {"created", created_},
            {"owned_by", "shoal"},
            {"root", model_.info.name},
            {"parent", nullptr},
            {"max_model_len", model_.info.max_model_len}};
  if (!model_.meta.is_null()) m["meta"] = model_.meta;
  if (req.target != "/v1/models") {
    const std::string name = req.target.substr(std::string("/v1/models/").size());
    if (name != model_.info.name) return SendError(*ex, ApiError::ModelNotFound(name));
    return ex->Respond(200, kJson, DumpJson(m));
  }
  ex->Respond(200, kJson, DumpJson(Json{{"object", "list"}, {"data", Json::array({m})}}));
}

void Server::HandleCluster(std::shared_ptr<HttpExchange> ex) {
  Json c = model_.cluster ? ClusterJson(model_.cluster->stats()) : Json{{"mode", "local"}};
  const EngineStats es = loop_->stats();
  c["model"] = model_.info.name;
  c["requests_running"] = es.n_running;
  c["requests_waiting"] = es.n_waiting;
  c["kv_cache_usage"] = es.kv_usage;
  c["generation_tokens_total"] = es.generation_tokens_total;
  c["uptime_s"] = UnixNow() - created_;
  // This process (the whole model when local, the coordinator over --nodes), measured now.
  if (auto mem = ReadProcessMemory(); mem.ok()) {
    c["server_rss_bytes"] = mem->rss_bytes;
    c["server_peak_rss_bytes"] = mem->peak_rss_bytes;
  }
  if (model_.cluster && c.contains("stages") && c["stages"].is_array()) {
    const std::vector<StageMetrics> sm = StageMetricsOf(*model_.cluster);
    for (size_t i = 0; i < sm.size() && i < c["stages"].size(); ++i) {
      Json& st = c["stages"][i];
      st["busy_fraction"] = sm[i].busy_fraction;
      st["tokens_per_s"] = sm[i].tokens_per_s;
      st["busy_seconds_total"] = sm[i].busy_seconds_total;
      st["tokens_total"] = sm[i].tokens_total;
    }
    if (!sm.empty()) c["load_window_s"] = sm.front().window_s;
  }
  ex->Respond(200, kJson, DumpJson(c));
}

bool Server::Authorized(const std::string& path, const HttpRequest& req, HttpExchange& ex) const {
  if (IsClusterControl(path)) {
    // Never an inference key: whoever may change the cluster may put a node into it.
    if (cfg_.admin_key.empty()) {
      SendError(ex, ApiError::Forbidden("cluster control is off on this listener (start the "
                                        "server with --admin-key-file to allow " +
                                        path + ")"));
      return false;
    }
    if (!BearerMatches(req, cfg_.admin_key)) {
      SendError(ex, ApiError::Unauthorized());
      return false;
    }
    return true;
  }
  if (path.rfind("/v1/", 0) == 0 && !cfg_.api_key.empty() && !BearerMatches(req, cfg_.api_key)) {
    SendError(ex, ApiError::Unauthorized());
    return false;
  }
  return true;
}

void Server::Offload(std::shared_ptr<HttpExchange> ex, size_t bytes,
                     std::function<std::function<void()>()> work) {
  auto task = [this, ex, work = std::move(work)] {
    std::function<void()> then;
    try {
      then = work();
    } catch (const std::exception& e) {
      Log(LogLevel::kError, "request failed: {}", e.what());
      then = [ex, why = std::string(e.what())] {
        SendError(*ex, ApiError::Internal("the request failed: " + why));
      };
    }
    http_->Post(std::move(then));
  };
  if (!pool_->TrySubmit(std::move(task), bytes)) {
    SendError(*ex,
              ApiError::Busy(std::to_string(pool_->n_queued()) +
                             " requests are already waiting to be parsed"),
              {{"Retry-After", "1"}});
  }
}

void Server::HandleGeneration(const HttpRequest& req, std::shared_ptr<HttpExchange> ex, bool chat) {
  const ModelInfo* info = &model_.info;  // fixed once ready; read-only on the work thread
  Offload(ex, req.body.size(), [this, ex, info, chat, body = req.body]() -> std::function<void()> {
    auto json = ParseJsonObject(body);
    if (!json.ok()) {
      return [ex, why = json.status().message()] { SendError(*ex, ApiError::BadRequest(why)); };
    }
    auto g = std::make_shared<GenerationRequest>();
    if (auto e = ParseGenerationRequest(*json, chat, *info, g.get()))
      return [ex, e = *e] { SendError(*ex, e); };
    return [this, ex, g] { SubmitGeneration(g, ex); };
  });
}

void Server::SubmitGeneration(std::shared_ptr<GenerationRequest> g,
                              std::shared_ptr<HttpExchange> ex) {
  if (ex->closed()) return;  // the client left while its body was parsed
  if (!ready_) {
    return SendError(*ex, ApiError::Unavailable("the server is shutting down"),
                     {{"Retry-After", "1"}});
  }
  // A pipeline whose live nodes cannot hold the model refuses new work; requests in flight
  // wait for the next plan.
  if (model_.cluster) {
    const std::string why = model_.cluster->Unavailable();
    if (!why.empty()) return SendError(*ex, ApiError::Unavailable(why), {{"Retry-After", "1"}});
  }
  // Every submitted job is in jobs_ until it completes; those with no token yet are waiting.
  int64_t waiting = 0, waiting_seqs = 0;
  for (const auto& [p, j] : jobs_) {
    if (!j->waiting()) continue;
    ++waiting;
    waiting_seqs += j->n_sequences();
  }
  const int64_t seqs = static_cast<int64_t>(g->prompts.size()) * g->n;
  if (cfg_.max_queued_requests >= 0 && waiting >= cfg_.max_queued_requests)
    return SendError(*ex, ApiError::TooManyRequests(static_cast<int>(waiting)),
                     {{"Retry-After", "1"}});
  if (cfg_.max_queued_sequences >= 0 && waiting_seqs + seqs > cfg_.max_queued_sequences) {
    return SendError(*ex,
                     ApiError::Busy(std::to_string(waiting_seqs) + " sequences are waiting and " +
                                    std::to_string(seqs) + " more would pass the limit of " +
                                    std::to_string(cfg_.max_queued_sequences)),
                     {{"Retry-After", "1"}});
  }
  auto job = std::make_shared<GenerationJob>(*g, ex, job_ctx_);
  if (!job->resume_error().empty())
    return SendError(*ex, ApiError::BadRequest(job->resume_error(), "resume"));
  std::vector<uint64_t> tickets;
  for (size_t p = 0; p < g->prompts.size(); ++p) {
    Request r;
    r.prompt = g->prompts[p];
    if (!g->resume_ids.empty()) {
      r.prompted = static_cast<int32_t>(r.prompt.size());
      r.prompt.insert(r.prompt.end(), g->resume_ids.begin(), g->resume_ids.end());
    }
    r.sampling = g->sampling;
    r.n = g->n;
    r.logprobs = g->logprobs;
    tickets.push_back(loop_->Submit(std::move(r)));
  }
  for (uint64_t t : tickets) by_ticket_[t] = job;
  job->SetTickets(tickets);
  jobs_[job.get()] = job;
  std::weak_ptr<GenerationJob> weak = job;
  ex->OnClose([this, weak] {
    auto j = weak.lock();
    if (!j) return;
    j->Abort();
    Forget(j);
    MaybeFinishDrain();
  });
  ex->OnDrained([weak] {
    if (auto j = weak.lock()) j->OnDrained();
  });
}

void Server::Forget(const std::shared_ptr<GenerationJob>& job) {
  for (uint64_t t : job->tickets()) by_ticket_.erase(t);
  jobs_.erase(job.get());
}

void Server::CheckStalledStreams() {
  const double now = NowSeconds();
  std::vector<std::shared_ptr<GenerationJob>> stalled;
  for (const auto& [p, j] : jobs_)
    if (j->paused_since() > 0 && now - j->paused_since() > cfg_.stream_stall_timeout_s)
      stalled.push_back(j);
  for (const auto& j : stalled) {
    Log(LogLevel::kWarn, "dropping a stream whose client read nothing for {} s",
        cfg_.stream_stall_timeout_s);
    j->DropStalled();
    Forget(j);
  }
  if (!stalled.empty()) {
    malloc_trim(0);  // hand the dropped streams' buffers back to the system now
    MaybeFinishDrain();
  }
  http_->After(1000, [this] { CheckStalledStreams(); });
}

void Server::OnEvents(std::vector<LoopEvent> events) {
  for (const LoopEvent& e : events) {
    auto it = by_ticket_.find(e.ticket);
    if (it == by_ticket_.end()) continue;
    std::shared_ptr<GenerationJob> job = it->second;
    if (job->OnEvent(e)) Forget(job);
  }
  MaybeFinishDrain();
}

}  // namespace shoal::server
