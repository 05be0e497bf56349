// The router's routes, forwarding with retries, health checks, metrics and drain (router.h).
#include "router/router.h"

#include <fmt/format.h>

#include <boost/asio/executor_work_guard.hpp>
#include <nlohmann/json.hpp>
#include <random>

#include "loadgen/url.h"
#include "router/upstream.h"
#include "server/api_error.h"
#include "server/bearer.h"

namespace shoal::router {

using server::ApiError;
using server::HttpExchange;
using server::HttpRequest;

struct Router::Forwarding {
  HttpRequest req;
  std::shared_ptr<HttpExchange> ex;
  std::string key;         // affinity key
  std::vector<int> tried;  // replicas that failed this request
  std::shared_ptr<UpstreamCall> call;
  bool head_sent = false;  // the client has its status line: no more plain retries
  bool discard = false;    // this attempt's answer is a 429 or 5xx, to retry elsewhere
  bool sse = false;
  // The journal of a resumable stream (one choice): the tokens and text bytes the client has,
  // so that another replica can go on where a failed one stopped ("resume", docs/API.md).
  nlohmann::json body;
  bool journal = false, client_ids = false, resuming = false, done = false;
  std::vector<int64_t> ids;
  int64_t text_bytes = 0;
  std::string pending;  // the start of an event not yet complete
  nlohmann::json first_id, first_created;
  int resumes = 0;
};

namespace {

// Health checks wait this long for an answer: a replica that takes longer is as good as down
// for new requests (its in-flight ones keep their own, longer timeout).
constexpr int kHealthTimeoutS = 2;

void Answer(HttpExchange& ex, const ApiError& e) {
  ex.Respond(e.status, "application/json", e.ToJson());
}

// A Prometheus label value: backslash, quote and newline escaped.
std::string Label(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? 'n' : c;
  }
  return out;
}

// Generation endpoints key their replica by prompt affinity; the rest go by load.
bool IsGeneration(const HttpRequest& req) {
  return req.method == "POST" &&
         (req.target == "/v1/completions" || req.target == "/v1/chat/completions");
}

}  // namespace

Router::Router(RouterConfig cfg)
    : cfg_(std::move(cfg)), set_(cfg_.replicas, cfg_.policy, cfg_.max_in_flight, cfg_.slack) {
  http_ = std::make_unique<server::HttpServer>(
      cfg_.http, [this](const HttpRequest& req, std::shared_ptr<HttpExchange> ex) {
        Handle(req, std::move(ex));
      });
}

Router::~Router() {
  client_io_.stop();
  if (client_thread_.joinable()) client_thread_.join();
}

Status Router::Listen() {
  if (cfg_.replicas.empty()) return Errorf("router: no --replica given");
  for (const std::string& u : cfg_.replicas) {
    SHOAL_ASSIGN_OR_RETURN(loadgen::Url url, loadgen::ParseUrl(u));
    SHOAL_ASSIGN_OR_RETURN(loadgen::HttpTarget t, loadgen::ResolveTarget(url));
    targets_.push_back(std::make_shared<const loadgen::HttpTarget>(std::move(t)));
  }
  return http_->Listen();
}

int Router::port() const { return http_->port(); }

Status Router::Run() {
  client_thread_ = std::thread([this] {
    auto guard = boost::asio::make_work_guard(client_io_);
    client_io_.run();
  });
  http_->OnSignal([this](int) { Shutdown(); });
  Post([this] { CheckHealth(); });
  http_->Run();
  client_io_.stop();
  client_thread_.join();
  return Status::Ok();
}

void Router::Shutdown() {
  Post([this] {
    if (draining_) return;
    draining_ = true;
    http_->StopAccepting();
    auto deadline = std::make_shared<int>(cfg_.drain_timeout_s * 10);
    auto poll = std::make_shared<std::function<void()>>();
    *poll = [this, deadline, poll] {
      int64_t in_flight = 0;
      for (const ReplicaState& r : set_.replicas()) in_flight += r.in_flight;
      if (in_flight == 0 || --*deadline <= 0) {
        http_->Stop();
        return;
      }
      http_->After(100, *poll);
    };
    (*poll)();
  });
}

void Router::Handle(const HttpRequest& req, std::shared_ptr<HttpExchange> ex) {
  const std::string& path = req.target;
  if (path == "/health") {
    int up = 0;
    for (const ReplicaState& r : set_.replicas()) up += r.up ? 1 : 0;
    const std::string body = fmt::format(R"({{"status":"{}","replicas_up":{},"replicas":{}}})",
                                         up > 0 ? "ok" : "unavailable", up, set_.replicas().size());
    ex->Respond(up > 0 && !draining_ ? 200 : 503, "application/json", body);
    return;
  }
  if (path == "/metrics") {
    ex->Respond(200, "text/plain; version=0.0.4", Metrics());
    return;
  }
  if (path.rfind("/v1/", 0) != 0) {
    Answer(*ex, ApiError::NotFound(path));
    return;
  }
  if (!cfg_.api_key.empty() && !server::BearerMatches(req, cfg_.api_key)) {
    Answer(*ex, ApiError::Unauthorized());
    return;
  }
  if (path == "/v1/cluster" && req.method == "GET") {
    ex->Respond(200, "application/json", ClusterJson());
    return;
  }
  if (req.method != "GET" && req.method != "POST") {
    Answer(*ex, ApiError::MethodNotAllowed(req.method, path));
    return;
  }
  if (draining_) {
    Answer(*ex, ApiError::Unavailable("the router is shutting down"));
    return;
  }
  auto f = std::make_shared<Forwarding>();
  f->req = req;
  f->ex = std::move(ex);
  if (cfg_.policy == Policy::kAffinity && IsGeneration(req))
    f->key = AffinityKey(req.body, cfg_.affinity_bytes);
  if (IsGeneration(req)) StartJournal(*f);
  Forward(std::move(f));
}

void Router::Post(std::function<void()> fn) {
  // The io loop does not catch: a throw here (a bug, an allocation failure) would end the
  // router and every stream it holds; it ends only the one piece of work instead.
  http_->Post([fn = std::move(fn)] {
    try {
      fn();
    } catch (const std::exception& e) {
      fmt::print(stderr, "router: internal error: {}\n", e.what());
    } catch (...) {
      fmt::print(stderr, "router: internal error\n");
    }
  });
}

void Router::StartJournal(Forwarding& f) {
  auto j = nlohmann::json::parse(f.req.body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;  // the replica answers the 400
  auto flag = [&](const char* k) { return j.contains(k) && j[k].is_boolean() && j[k].get<bool>(); };
  const bool one = !j.contains("n") || (j["n"].is_number_integer() && j["n"].get<int64_t>() == 1);
  const bool one_prompt =
      !j.contains("prompt") || j["prompt"].is_string() ||
      (j["prompt"].is_array() && !j["prompt"].empty() && j["prompt"].front().is_number_integer());
  if (!flag("stream") || !one || !one_prompt || j.contains("resume")) return;
  f.journal = true;
  f.client_ids = flag("return_token_ids");
  j["return_token_ids"] = true;
  // A seed fixes the draws (a pure function of seed and position), so a resumed stream samples
  // what the failed one would have.
  if (!j.contains("seed") || j["seed"].is_null())
    j["seed"] =
        static_cast<int64_t>((uint64_t{std::random_device{}()} << 31) ^ std::random_device{}());
  f.body = std::move(j);
  f.req.body = f.body.dump();
}

void Router::Relay(Forwarding& f, std::string data) {
  if (!f.journal) {
    f.ex->Write(std::move(data));
    return;
  }
  // Whole SSE events only: the journal counts what the client got.
  f.pending += data;
  std::string out;
  size_t end;
  while ((end = f.pending.find("\n\n")) != std::string::npos) {
    std::string ev = f.pending.substr(0, end);
    f.pending.erase(0, end + 2);
    if (ev.rfind("data: ", 0) != 0 || ev == "data: [DONE]") {
      f.done = f.done || ev == "data: [DONE]";
      out += ev + "\n\n";
      continue;
    }
    auto j = nlohmann::json::parse(ev.substr(6), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array()) {
      out += ev + "\n\n";
      continue;
    }
    if (f.first_id.is_null()) {
      f.first_id = j.value("id", nlohmann::json());
      f.first_created = j.value("created", nlohmann::json());
    } else {  // a resumed stream keeps the first answer's id
      j["id"] = f.first_id;
      j["created"] = f.first_created;
    }
    bool role_only = false;
    for (auto& c : j["choices"]) {
      if (!c.is_object()) continue;
      if (c.contains("token_ids") && c["token_ids"].is_array())
        for (const auto& id : c["token_ids"])
          if (id.is_number_integer()) f.ids.push_back(id.get<int64_t>());
      if (!f.client_ids) c.erase("token_ids");
      if (c.contains("text") && c["text"].is_string())
        f.text_bytes += static_cast<int64_t>(c["text"].get_ref<const std::string&>().size());
      if (c.contains("delta") && c["delta"].is_object()) {
        const auto& d = c["delta"];
        if (d.contains("content") && d["content"].is_string())
          f.text_bytes += static_cast<int64_t>(d["content"].get_ref<const std::string&>().size());
        role_only = d.contains("role") && (!d.contains("content") || d["content"] == "");
      }
    }
    if (f.resuming && role_only) continue;  // the client has had its role chunk
    out += "data: " + j.dump() + "\n\n";
  }
  if (!out.empty()) f.ex->Write(std::move(out));
}

void Router::Cut(Forwarding& f, const std::string& why) {
  ++cut_;
  if (f.sse) {
    const ApiError e = ApiError::Unavailable("the replica failed mid-stream: " + why);
    f.ex->Write("data: " + e.ToJson() + "\n\n");
    f.ex->EndStream();
  } else {
    f.ex->Close();
  }
}

void Router::Forward(std::shared_ptr<Forwarding> f) {
  if (f->ex->closed()) return;
  const int i = set_.Pick(f->key, f->tried);
  if (i < 0 && f->head_sent) {
    Cut(*f, "no other replica to resume on");
    return;
  }
  if (i < 0) {
    bool any_up = false;
    for (size_t k = 0; k < set_.replicas().size(); ++k)
      any_up = any_up ||
               (set_.replicas()[k].up &&
                std::find(f->tried.begin(), f->tried.end(), static_cast<int>(k)) == f->tried.end());
    if (any_up) {
      ++rejected_;
      Answer(*f->ex, ApiError::Busy(fmt::format("every replica has {} requests in flight",
                                                set_.max_in_flight())));
    } else {
      ++unavailable_;
      Answer(*f->ex, ApiError::Unavailable(f->tried.empty() ? "no replica is up"
                                                            : "no replica could take the request"));
    }
    return;
  }
  set_.Start(i);
  f->discard = false;
  UpstreamRequest u;
  u.method = f->req.method;
  u.path = f->req.target + (f->req.query.empty() ? "" : "?" + f->req.query);
  u.body = f->req.body;
  const std::string ct = f->req.Header("content-type");
  if (!ct.empty()) u.content_type = ct;
  u.api_key = cfg_.replica_api_key;
  u.idle_timeout_s = cfg_.idle_timeout_s;
  UpstreamHandlers h;
  h.on_head = [this, f](int status, std::string type) {
    Post([f, status, type = std::move(type)] {
      // A full replica (429) or a failing one (5xx): try another before the client sees it.
      if (status == 429 || status >= 500 || (f->resuming && status != 200)) {
        f->discard = true;
        return;
      }
      if (f->ex->closed() || f->resuming) return;  // resuming: the client's stream goes on
      f->head_sent = true;
      f->sse = type.find("event-stream") != std::string::npos;
      f->ex->StartStream(status, type.empty() ? "application/json" : type);
    });
  };
  h.on_data = [this, f](std::string data) {
    Post([this, f, data = std::move(data)]() mutable {
      if (f->discard || !f->head_sent || f->ex->closed()) return;
      Relay(*f, std::move(data));
      if (f->ex->buffered_bytes() > cfg_.max_buffered_bytes) {
        f->ex->Close();
        if (f->call) f->call->Cancel();
      }
    });
  };
  h.on_done = [this, f, i](Status s) { Post([this, f, i, s = std::move(s)] { Finish(f, i, s); }); };
  f->call = StartUpstream(client_io_, targets_[static_cast<size_t>(i)], std::move(u), std::move(h));
  f->ex->OnClose([f] {
    if (f->call) f->call->Cancel();
  });
}

void Router::Finish(std::shared_ptr<Forwarding> f, int replica, Status s) {
  const bool failed = !s.ok() || f->discard;
  set_.Finish(replica, failed);
  // Refused or unreachable: down until a health check says otherwise.
  if (!s.ok() && s.message().rfind("connect", 0) == 0) MarkUp(replica, false);
  if (f->ex->closed()) return;
  if (failed && !f->head_sent) {
    ++retries_;
    f->tried.push_back(replica);
    Forward(std::move(f));
    return;
  }
  if (failed && f->journal && !f->done && f->resumes < static_cast<int>(set_.replicas().size())) {
    // Mid-stream: another replica goes on from the tokens the client has.
    ++resumed_;
    ++f->resumes;
    f->resuming = true;
    f->pending.clear();
    f->tried.push_back(replica);
    f->body["resume"] = {{"token_ids", f->ids}, {"text_bytes", f->text_bytes}};
    f->req.body = f->body.dump();
    Forward(std::move(f));
    return;
  }
  if (failed) {
    Cut(*f, s.ok() ? "it refused to resume" : s.message());
    return;
  }
  f->ex->EndStream();
}

void Router::CheckHealth() {
  for (size_t i = 0; i < targets_.size(); ++i) {
    UpstreamRequest u;
    u.method = "GET";
    u.path = "/health";
    u.api_key = cfg_.replica_api_key;
    u.idle_timeout_s = kHealthTimeoutS;
    auto answered = std::make_shared<bool>(false);
    UpstreamHandlers h;
    const int k = static_cast<int>(i);
    h.on_head = [this, k, answered](int status, std::string) {
      *answered = true;
      Post([this, k, status] { MarkUp(k, status == 200); });
    };
    h.on_data = [](std::string) {};
    h.on_done = [this, k, answered](Status s) {
      if (!s.ok() && !*answered) Post([this, k] { MarkUp(k, false); });
    };
    StartUpstream(client_io_, targets_[i], std::move(u), std::move(h));
  }
  http_->After(cfg_.health_interval_ms, [this] { CheckHealth(); });
}

void Router::MarkUp(int i, bool up) {
  const ReplicaState& r = set_.replicas()[static_cast<size_t>(i)];
  if (r.up != up) fmt::print(stderr, "router: replica {} is {}\n", r.url, up ? "up" : "down");
  set_.SetUp(i, up);
}

std::string Router::Metrics() const {
  std::string m;
  auto family = [&](const char* name, const char* type, const char* help) {
    m += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  family("shoal_router_replica_up", "gauge", "1 while the replica answers its health check");
  for (const ReplicaState& r : set_.replicas())
    m += fmt::format("shoal_router_replica_up{{replica=\"{}\"}} {}\n", Label(r.url), r.up ? 1 : 0);
  family("shoal_router_in_flight", "gauge", "Requests forwarded to the replica and not finished");
  for (const ReplicaState& r : set_.replicas())
    m += fmt::format("shoal_router_in_flight{{replica=\"{}\"}} {}\n", Label(r.url), r.in_flight);
  family("shoal_router_requests_total", "counter", "Requests forwarded to the replica");
  for (const ReplicaState& r : set_.replicas())
    m +=
        fmt::format("shoal_router_requests_total{{replica=\"{}\"}} {}\n", Label(r.url), r.requests);
  family("shoal_router_replica_failures_total", "counter",
         "Forwarded requests the replica refused, failed or answered 429/5xx");
  for (const ReplicaState& r : set_.replicas())
    m += fmt::format("shoal_router_replica_failures_total{{replica=\"{}\"}} {}\n", Label(r.url),
                     r.failures);
  family("shoal_router_rejected_total", "counter", "Requests answered 429: every replica full");
  m += fmt::format("shoal_router_rejected_total {}\n", rejected_);
  family("shoal_router_unavailable_total", "counter", "Requests answered 503: no replica up");
  m += fmt::format("shoal_router_unavailable_total {}\n", unavailable_);
  family("shoal_router_retries_total", "counter",
         "Requests sent to another replica after one failed before answering");
  m += fmt::format("shoal_router_retries_total {}\n", retries_);
  family("shoal_router_resumed_total", "counter",
         "Streams resumed on another replica after theirs failed mid-answer");
  m += fmt::format("shoal_router_resumed_total {}\n", resumed_);
  family("shoal_router_cut_total", "counter", "Answers cut by a replica failing mid-answer");
  m += fmt::format("shoal_router_cut_total {}\n", cut_);
  return m;
}

std::string Router::ClusterJson() const {
  nlohmann::json reps = nlohmann::json::array();
  for (const ReplicaState& r : set_.replicas())
    reps.push_back({{"url", r.url},
                    {"up", r.up},
                    {"in_flight", r.in_flight},
                    {"requests_total", r.requests},
                    {"failures_total", r.failures}});
  const char* policy = cfg_.policy == Policy::kAffinity      ? "affinity"
                       : cfg_.policy == Policy::kLeastLoaded ? "least-loaded"
                                                             : "round-robin";
  nlohmann::json j = {{"role", "router"},
                      {"policy", policy},
                      {"max_in_flight_per_replica", cfg_.max_in_flight},
                      {"replicas", reps}};
  return j.dump();
}

}  // namespace shoal::router
