// LinkWatch: a ping-and-read thread per node link.
#include "cluster/link_watch.h"

#include <algorithm>
#include <chrono>

#include "base/log.h"
#include "cluster/wire.h"

namespace shoal::cluster {

namespace {

// A link thread's Recv wakes at least this often to ping and to see Stop; NextResult rechecks
// the links' health as often. 20 ms: a tenth of the default suspect time.
constexpr int64_t kPollMs = 20;

net::HeartbeatConfig MonitorConfig(const WatchConfig& c) {
  net::HeartbeatConfig h;
  h.interval_us = c.heartbeat_ms * 1000;
  h.suspect_after = static_cast<int>((c.suspect_ms + c.heartbeat_ms - 1) / c.heartbeat_ms);
  h.dead_after = std::max(h.suspect_after + 1,
                          static_cast<int>((c.dead_ms + c.heartbeat_ms - 1) / c.heartbeat_ms));
  return h;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Status CheckWatchConfig(const WatchConfig& c) {
  if (c.heartbeat_ms <= 0 || c.suspect_ms < c.heartbeat_ms || c.dead_ms <= c.suspect_ms)
    return Errorf(
        "bad failure detection: heartbeat {} ms, suspect {} ms, dead {} ms (need 0 < heartbeat "
        "<= suspect < dead)",
        c.heartbeat_ms, c.suspect_ms, c.dead_ms);
  return Status::Ok();
}

LinkWatch::LinkWatch(std::vector<std::shared_ptr<net::Conn>> conns, std::vector<std::string> names,
                     const WatchConfig& config)
    : conns_(std::move(conns)),
      names_(std::move(names)),
      config_(config),
      monitor_(std::move(*net::HeartbeatMonitor::Create(&clock_, MonitorConfig(config)))),
      results_(conns_.size()),
      memory_(conns_.size()),
      load_(conns_.size()),
      windows_(conns_.size()) {
  names_.resize(conns_.size());
  for (size_t i = 0; i < conns_.size(); ++i) monitor_.Add(std::to_string(i));
  for (size_t i = 0; i < conns_.size(); ++i) threads_.emplace_back([this, i] { Serve(i); });
}

LinkWatch::~LinkWatch() { Stop(); }

void LinkWatch::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& c : conns_) c->Shutdown();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void LinkWatch::Serve(size_t i) {
  net::Conn& c = *conns_[i];
  const std::string key = std::to_string(i);
  int64_t last_ping = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_) return;
    }
    Status err;
    if (NowMs() - last_ping >= config_.heartbeat_ms) {
      last_ping = NowMs();
      net::Frame ping;
      ping.type = net::MsgType::kHeartbeat;
      err = c.Send(ping);
    }
    if (err.ok()) {
      auto f = c.Recv(std::min(kPollMs, config_.heartbeat_ms));
      if (!f.ok()) {
        err = f.status();
      } else if (*f) {
        monitor_.Heard(key);
        if ((*f)->type == net::MsgType::kStepResult) {
          std::lock_guard<std::mutex> lk(mu_);
          results_[i].push_back(std::move(**f));
          cv_.notify_all();
        } else if ((*f)->type == net::MsgType::kControl) {
          std::lock_guard<std::mutex> lk(mu_);
          controls_.push_back({i, std::move(**f)});
          cv_.notify_all();
        } else if ((*f)->type == net::MsgType::kHeartbeat) {
          auto h = DecodeHeartbeatReply((*f)->payload);  // an empty answer carries none
          std::lock_guard<std::mutex> lk(mu_);
          if (h.ok()) {
            memory_[i] = h->mem;
            load_[i] = h->load;
            windows_[i].Push(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count(),
                             h->load);
          }
        }
      }
    }
    if (!err.ok()) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!stop_ && dead_.empty())
        dead_ = "node " + names_[i] + ": link lost (" + err.message() + ")";
      cv_.notify_all();
      return;
    }
  }
}

template <typename Ready>
Status LinkWatch::WaitFor(Ready ready, int64_t timeout_ms, const std::string& what) {
  const int64_t t_end = NowMs() + timeout_ms;
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (ready()) return Status::Ok();
    if (!dead_.empty()) return Errorf("{}", dead_);
    lk.unlock();
    const std::string silent = CheckDead();
    lk.lock();
    if (ready()) return Status::Ok();
    if (!silent.empty()) return Errorf("{}", silent);
    if (NowMs() >= t_end) return Errorf("no {} within {} ms", what, timeout_ms);
    cv_.wait_for(lk, std::chrono::milliseconds(kPollMs));
  }
}

Result<net::Frame> LinkWatch::NextResult(size_t i, int64_t timeout_ms) {
  SHOAL_RETURN_IF_ERROR(WaitFor([&] { return !results_[i].empty(); }, timeout_ms,
                                "step result from node " + names_[i]));
  std::lock_guard<std::mutex> lk(mu_);
  net::Frame f = std::move(results_[i].front());
  results_[i].pop_front();
  return f;
}

Result<LinkWatch::Control> LinkWatch::NextControl(int64_t timeout_ms) {
  SHOAL_RETURN_IF_ERROR(WaitFor([&] { return !controls_.empty(); }, timeout_ms, "answer"));
  std::lock_guard<std::mutex> lk(mu_);
  Control c = std::move(controls_.front());
  controls_.pop_front();
  return c;
}

std::vector<NodeLoadRate> LinkWatch::LoadRates() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<NodeLoadRate> out;
  for (const NodeLoadWindow& w : windows_) out.push_back(w.Rate());
  return out;
}

std::vector<NodeLoad> LinkWatch::Load() const {
  std::lock_guard<std::mutex> lk(mu_);
  return load_;
}

std::vector<ProcessMemory> LinkWatch::Memory() const {
  std::lock_guard<std::mutex> lk(mu_);
  return memory_;
}

std::vector<net::HeartbeatMonitor::PeerState> LinkWatch::States() const {
  std::vector<net::HeartbeatMonitor::PeerState> out(conns_.size());
  const auto all = monitor_.Check();  // ordered by key, not by link: map them back
  for (const auto& s : all) {
    const size_t i = std::stoul(s.peer);
    if (i >= out.size()) continue;
    out[i] = s;
    out[i].peer = names_[i];
  }
  std::lock_guard<std::mutex> lk(mu_);
  for (size_t i = 0; i < out.size(); ++i)
    if (conns_[i]->state() != net::LinkState::kOpen && !stop_)
      out[i].health = net::PeerHealth::kDead;
  return out;
}

std::string LinkWatch::DeadReason() const {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!dead_.empty()) return dead_;
  }
  for (const auto& s : States())
    if (s.health == net::PeerHealth::kDead)
      return "node " + s.peer + ": silent for " +
             std::to_string(s.missed_intervals * config_.heartbeat_ms) + " ms";
  return "";
}

std::string LinkWatch::CheckDead() {
  const std::string why = DeadReason();
  if (why.empty()) return why;
  const auto states = States();
  for (size_t i = 0; i < states.size(); ++i)
    if (states[i].health == net::PeerHealth::kDead) conns_[i]->Shutdown();
  return why;
}

}  // namespace shoal::cluster
