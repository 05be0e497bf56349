// FailoverExecutor: detect (link_watch.h), re-plan over the live nodes, reassign, replay.
#include "cluster/failover_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "base/log.h"

namespace shoal::cluster {

namespace {

double Now() { return NowSeconds(); }

// The replay bookkeeping forgets sequences past this many (each costs ~48 bytes; a server runs
// a few hundred at once). Forgetting only undercounts the replayed-tokens metric.
constexpr size_t kMaxTrackedSeqs = 65536;

// Sleep slices while waiting between attempts, so Stop is seen within 50 ms.
constexpr int64_t kSleepSliceMs = 50;

// A node lost while loading its assignment is left out by the next attempt's probe, which can
// start at once; after this many such losses in a row the cluster is churning, and attempts
// wait retry_ms as when nothing fits.
constexpr int kQuickRetries = 3;

}  // namespace

FailoverExecutor::FailoverExecutor(const FailoverOptions& opts, const gguf::File& file,
                                   net::ClusterKey key, int64_t n_vocab, int64_t n_embd)
    : opts_(opts),
      file_(&file),
      key_(std::move(key)),
      n_vocab_(n_vocab),
      n_embd_(n_embd),
      active_(opts.cluster.nodes),
      standby_(opts.standby) {}

FailoverExecutor::~FailoverExecutor() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    closing_ = true;
  }
  watch_cv_.notify_all();
  if (standby_watch_.joinable()) standby_watch_.join();
}

void FailoverExecutor::WatchStandbys() {
  const int64_t timeout =
      opts_.probe_timeout_ms > 0 ? opts_.probe_timeout_ms : opts_.cluster.watch.suspect_ms;
  std::unique_lock<std::mutex> lk(mu_);
  while (!watch_cv_.wait_for(lk, std::chrono::milliseconds(opts_.standby_probe_ms),
                             [&] { return closing_; })) {
    // The standbys due now: one that missed its last probes waits out its back-off.
    std::vector<std::string> due;
    const double now = Now();
    for (const std::string& a : standby_)
      if (backoff_[a].next_s <= now) due.push_back(a);
    std::erase_if(backoff_, [&](const auto& b) {  // forget nodes that left the standby list
      return std::find(standby_.begin(), standby_.end(), b.first) == standby_.end();
    });
    lk.unlock();
    // In parallel, as the failover's probes: a stopped standby holds its probe for `timeout`.
    std::vector<std::thread> probes;
    for (const std::string& a : due)
      probes.emplace_back([this, a, timeout] {
        const bool alive =  // the link closes at once
            ConnectNode(a, {}, key_, timeout, opts_.cluster.link_cipher).ok();
        std::lock_guard<std::mutex> g(mu_);
        if (std::find(standby_.begin(), standby_.end(), a) == standby_.end()) return;
        health_[a] = alive ? "alive" : "dead";
        Backoff& b = backoff_[a];
        b.interval_ms =
            alive ? 0
                  : std::min(std::max(b.interval_ms * 2, opts_.standby_probe_ms),
                             std::max(opts_.probe_backoff_max_ms, opts_.standby_probe_ms));
        b.next_s = Now() + static_cast<double>(b.interval_ms) / 1e3;
      });
    for (std::thread& t : probes) t.join();
    lk.lock();
  }
}

Result<std::unique_ptr<FailoverExecutor>> FailoverExecutor::Create(const FailoverOptions& opts,
                                                                   const gguf::File& file,
                                                                   net::ClusterKey key,
                                                                   int64_t n_vocab,
                                                                   int64_t n_embd) {
  SHOAL_RETURN_IF_ERROR(CheckWatchConfig(opts.cluster.watch));
  auto f = std::unique_ptr<FailoverExecutor>(
      new FailoverExecutor(opts, file, std::move(key), n_vocab, n_embd));
  SHOAL_ASSIGN_OR_RETURN(Cluster cl, ConnectAndPlan(opts.cluster, file, f->key_));
  cl.epoch = f->epoch_;
  SHOAL_RETURN_IF_ERROR(AssignLayers(cl, opts.cluster));
  for (const std::string& s : f->standby_) f->health_[s] = "unknown";
  f->Install(std::move(cl));
  if (opts.standby_probe_ms > 0)
    f->standby_watch_ = std::thread([p = f.get()] { p->WatchStandbys(); });
  return f;
}

void FailoverExecutor::SetMicroBatches(std::function<int32_t(int32_t)> f) {
  micro_batches_ = std::move(f);
  if (inner_ && micro_batches_)
    inner_->SetMicroBatches(
        micro_batches_(static_cast<int32_t>(inner_->cluster().plan.stages.size())));
}

void FailoverExecutor::Install(Cluster cl) {
  auto exec =
      std::make_unique<RemoteExecutor>(std::move(cl), n_vocab_, n_embd_, opts_.cluster.watch);
  const planner::Plan& plan = exec->cluster().plan;
  if (micro_batches_)
    exec->SetMicroBatches(micro_batches_(static_cast<int32_t>(plan.stages.size())));
  std::vector<std::string> names, addrs;
  std::vector<std::vector<std::string>> members;
  for (const planner::Stage& st : plan.stages) {
    names.push_back(st.node_name);
    addrs.push_back(exec->cluster().infos[static_cast<size_t>(st.node)].address);
    members.emplace_back();
    for (int32_t n : StageNodes(st))
      members.back().push_back(exec->cluster().infos[static_cast<size_t>(n)].address);
  }
  n_layer_ = plan.n_layer;
  std::lock_guard<std::mutex> lk(mu_);
  for (const measure::NodeInfo& n : exec->cluster().infos) names_[n.address] = n.name;
  stats_.epoch = exec->cluster().epoch;
  stats_.plan = plan;
  stats_.stage_addresses = std::move(addrs);
  stats_.member_addresses = std::move(members);
  stage_stats_ = exec->stage_stats();
  stage_names_ = std::move(names);
  inner_ = std::move(exec);
  installed_s_ = Now();
}

Status FailoverExecutor::TryPlan(uint32_t epoch, bool rebalance,
                                 const std::vector<std::string>& skip,
                                 std::vector<std::string>* lost) {
  // Probe every known node: the plan's, the standbys (and nodes evicted earlier, which wait in
  // the standby list and come back when they answer again).
  std::map<std::string, NodeLink> alive;
  auto probe = [&](const std::string& addr) {
    NodeOverride o;
    for (size_t i = 0; i < opts_.cluster.nodes.size() && i < opts_.cluster.overrides.size(); ++i)
      if (opts_.cluster.nodes[i] == addr) o = opts_.cluster.overrides[i];
    for (size_t i = 0; i < opts_.standby.size() && i < opts_.standby_overrides.size(); ++i)
      if (opts_.standby[i] == addr) o = opts_.standby_overrides[i];
    const int64_t timeout =
        opts_.probe_timeout_ms > 0 ? opts_.probe_timeout_ms : opts_.cluster.watch.suspect_ms;
    if (std::find(skip.begin(), skip.end(), addr) != skip.end()) {
      std::lock_guard<std::mutex> lk(mu_);
      health_[addr] = "dead";  // lost a moment ago: not worth a probe's suspect time
      return;
    }
    auto l = ConnectNode(addr, o, key_, timeout, opts_.cluster.link_cipher);
    std::lock_guard<std::mutex> lk(mu_);
    health_[addr] = l.ok() ? "alive" : "dead";
    if (l.ok()) {
      backoff_.erase(addr);  // answers: the standby watch probes it at the normal rate
      names_[addr] = l->info.name;
      alive.emplace(addr, std::move(*l));
    }
  };
  std::vector<std::string> act0, stb0;
  {
    // Drained nodes leave the membership (until they join again).
    std::lock_guard<std::mutex> lk(mu_);
    auto drained = [&](const std::string& a) {
      return std::find(drained_.begin(), drained_.end(), a) != drained_.end();
    };
    std::erase_if(active_, drained);
    std::erase_if(standby_, drained);
    act0 = active_;
    stb0 = standby_;
  }
  const double t0 = Now();
  {
    // In parallel: a stopped node holds its probe for the whole probe timeout.
    std::vector<std::thread> probes;
    for (const std::vector<std::string>* list : {&act0, &stb0})
      for (const std::string& a : *list) probes.emplace_back(probe, a);
    for (std::thread& t : probes) t.join();
  }
  const double t_probe = Now() - t0;
  // A dead node's place goes to the first live standby; the dead node becomes a standby
  // itself (taken again if it comes back).
  std::vector<std::string> active, standby = stb0, evicted;
  for (const std::string& a : act0) {
    if (alive.count(a)) {
      active.push_back(a);
      continue;
    }
    evicted.push_back(a);
    auto s = std::find_if(standby.begin(), standby.end(),
                          [&](const std::string& x) { return alive.count(x) > 0; });
    if (s == standby.end()) continue;
    Log(LogLevel::kInfo, "failover: standby {} takes the place of {}", *s, a);
    active.push_back(*s);
    standby.erase(s);
  }
  for (const std::string& e : evicted) standby.push_back(e);
  // Publishes the lists, keeping nodes that joined meanwhile (Join appends under mu_).
  auto publish = [&](const std::vector<std::string>& act, std::vector<std::string> stb) {
    std::lock_guard<std::mutex> lk(mu_);
    std::erase_if(stb, [&](const std::string& x) {  // drained while this plan was made
      return std::find(drained_.begin(), drained_.end(), x) != drained_.end();
    });
    for (const std::string& x : standby_)
      if (std::find(stb.begin(), stb.end(), x) == stb.end() &&
          std::find(act.begin(), act.end(), x) == act.end() &&
          std::find(drained_.begin(), drained_.end(), x) == drained_.end())
        stb.push_back(x);
    active_ = act;
    standby_ = std::move(stb);
  };
  publish(active, standby);
  // Plans over `act` and assigns; if they cannot hold the model, adds live standbys one at a
  // time.
  auto attempt = [&](std::vector<std::string> act, std::vector<std::string> stb) -> Status {
    Status last = Errorf("no live node");
    for (;;) {
      if (!act.empty()) {
        std::vector<NodeLink> links;
        for (const std::string& a : act) links.push_back(alive.at(a));
        auto cl = PlanCluster(std::move(links), opts_.cluster, *file_);
        if (cl.ok()) {
          cl->epoch = epoch;
          Log(LogLevel::kWarn, "failover: plan of epoch {}\n{}", epoch,
              planner::FormatPlan(cl->plan));
          const double t1 = Now();
          if (Status s = AssignLayers(*cl, opts_.cluster, lost); !s.ok()) return s;
          Log(LogLevel::kWarn, "failover: probed {} nodes in {:.3f} s, assigned in {:.3f} s",
              alive.size(), t_probe, Now() - t1);
          publish(act, stb);
          Install(std::move(*cl));
          return Status::Ok();
        }
        last = cl.status();
      }
      auto s = std::find_if(stb.begin(), stb.end(),
                            [&](const std::string& x) { return alive.count(x) > 0; });
      if (s == stb.end()) break;
      act.push_back(*s);
      stb.erase(s);
    }
    return last.Annotate("the live nodes cannot hold the model");
  };
  if (rebalance) {
    // Every live standby joins the plan (the planner gives each node at least one layer, so at
    // most n_layer nodes). On failure the caller re-plans without it.
    std::vector<std::string> act = active, stb;
    for (const std::string& x : standby)
      (alive.count(x) && static_cast<int32_t>(act.size()) < n_layer_ ? act : stb).push_back(x);
    return attempt(std::move(act), std::move(stb));
  }
  return attempt(active, standby);
}

Status FailoverExecutor::Drain(const std::string& node) {
  std::lock_guard<std::mutex> lk(mu_);
  auto is = [&](const std::string& a) {
    auto n = names_.find(a);
    return a == node || (n != names_.end() && n->second == node);
  };
  // A standby leaves at once; a node in the plan at the next step (a re-plan without it).
  auto sb = std::find_if(standby_.begin(), standby_.end(), is);
  if (sb != standby_.end()) {
    Log(LogLevel::kWarn, "drain: standby {} left the cluster", *sb);
    if (std::find(drained_.begin(), drained_.end(), *sb) == drained_.end()) drained_.push_back(*sb);
    standby_.erase(sb);
    return Status::Ok();
  }
  auto ac = std::find_if(active_.begin(), active_.end(), is);
  if (ac == active_.end()) return Errorf("no node '{}' in the cluster", node);
  if (std::find(drained_.begin(), drained_.end(), *ac) == drained_.end()) drained_.push_back(*ac);
  replan_ = true;
  Log(LogLevel::kWarn, "drain: {} leaves the cluster at the next step", *ac);
  return Status::Ok();
}

Status FailoverExecutor::Join(const std::string& address, bool standby) {
  SHOAL_ASSIGN_OR_RETURN(auto hp, net::ParseHostPort(address));
  if (hp.second == 0) return Errorf("bad port in '{}'", address);
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto member = [&](const std::vector<std::string>& list) {
      return std::find(list.begin(), list.end(), address) != list.end();
    };
    if (std::erase(drained_, address) > 0 && (member(active_) || member(standby_))) {
      Log(LogLevel::kWarn, "join: {} stays (its drain had not happened yet)", address);
      return Status::Ok();
    }
    if (member(active_) || (standby && member(standby_)))
      return Errorf("{} is already a member", address);
    if (!member(standby_) && standby_.size() >= opts_.max_standby)
      return Errorf("join of {} refused: {} standby nodes wait already (at most {}); drain some",
                    address, standby_.size(), opts_.max_standby);
    backoff_.erase(address);  // joined (again): probed at the normal rate
    if (!member(standby_)) {
      standby_.push_back(address);  // TryPlan works on copies and keeps what joined meanwhile
      health_[address] = "unknown";
    }
    Log(LogLevel::kWarn, "join: {} is a standby{}", address,
        standby ? "" : "; rebalancing onto it at the next step");
  }
  if (!standby) Rebalance();
  return Status::Ok();
}

void FailoverExecutor::Rebalance() {
  rebalance_ = true;
  Log(LogLevel::kWarn, "rebalance: re-planning over every live node at the next step");
}

void FailoverExecutor::DampFlaps(const std::vector<std::string>& lost_now) {
  // 3 plans in a row each lost within 5 s of being made: a healthy node that crashes under
  // chaos is lost at random times, once; a node behind a tampering relay is lost at its first
  // step, every plan (1,000 plans a minute without this). Sitting out 30 s, doubling to 10 min,
  // bounds the replays it causes to a few per round.
  constexpr double kFlapPlanS = 5.0;
  constexpr int kFlapLimit = 3;
  constexpr double kQuarantineS = 30.0, kQuarantineMaxS = 600.0;
  const double now = Now();
  for (const std::string& a : lost_now) {
    Flap& f = flaps_[a];
    f.short_plans = now - installed_s_ < kFlapPlanS ? f.short_plans + 1 : 1;
    if (f.short_plans < kFlapLimit) continue;
    const double wait = std::min(kQuarantineMaxS, kQuarantineS * std::pow(2.0, f.rounds++));
    f.until_s = now + wait;
    f.short_plans = 0;
    Log(LogLevel::kWarn,
        "failover: {} was lost {} plans in a row within {:.0f} s of each: it sits out of plans "
        "for {:.0f} s",
        a, kFlapLimit, kFlapPlanS, wait);
  }
}

std::vector<std::string> FailoverExecutor::Quarantined() {
  std::vector<std::string> out;
  const double now = Now();
  for (const auto& [a, f] : flaps_)
    if (f.until_s > now) {
      out.push_back(a);
      health_[a] = "quarantined";
    }
  return out;
}

Status FailoverExecutor::Recover(const Status& why, bool drain, bool rebalance) {
  const bool planned = drain || rebalance;
  const double t0 = Now();
  Log(LogLevel::kWarn, "{}: {}", planned ? "re-plan" : "failover", why.message());
  for (const auto& [seq, rows] : computed_) replay_[seq] = std::max(replay_[seq], rows);
  computed_.clear();
  std::vector<std::string> quarantined;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (drain) ++stats_.drains;
    if (rebalance) ++stats_.rebalances;
    if (!planned) {
      ++stats_.failovers;
      stats_.last_failure = why.message();
    }
    std::vector<std::string> dead;
    if (inner_) {
      const auto states = inner_->LinkStates();
      const auto& infos = inner_->cluster().infos;
      for (size_t i = 0; i < states.size() && i < infos.size(); ++i) {
        health_[infos[i].address] = net::PeerHealthName(states[i].health);
        if (states[i].health == net::PeerHealth::kDead) dead.push_back(infos[i].address);
      }
    }
    if (!planned) DampFlaps(dead);
    quarantined = Quarantined();
  }
  // Closing the old links tells every node the old plan is over (their late frames carry the
  // old epoch and are dropped).
  std::unique_ptr<RemoteExecutor> old;
  {
    std::lock_guard<std::mutex> lk(mu_);
    old = std::move(inner_);
  }
  old.reset();
  std::vector<std::string> lost;
  for (int quick = 0;;) {
    if (stop_) return Errorf("stopped while recovering from: {}", why.message());
    std::vector<std::string> skip = std::move(lost);
    lost.clear();
    skip.insert(skip.end(), quarantined.begin(), quarantined.end());
    const Status s = TryPlan(++epoch_, rebalance, skip, &lost);
    if (s.ok()) break;
    if (rebalance) {
      Log(LogLevel::kWarn, "rebalance: {}; re-planning without the new nodes", s.message());
      rebalance = false;
      continue;
    }
    if (!lost.empty() && quick++ < kQuickRetries) {
      Log(LogLevel::kWarn, "failover: {}; re-planning without that node", s.message());
      continue;
    }
    Log(LogLevel::kWarn, "failover: no plan yet: {}", s.message());
    {
      std::lock_guard<std::mutex> lk(mu_);
      stats_.unavailable = "the cluster lost nodes and cannot serve yet: " + s.message();
    }
    if (opts_.give_up_ms > 0 && (Now() - t0) * 1e3 > static_cast<double>(opts_.give_up_ms)) {
      std::lock_guard<std::mutex> lk(mu_);
      stats_.unavailable = "no plan after a node failure: " + s.message();
      return s;
    }
    for (int64_t w = 0; w < opts_.retry_ms && !stop_; w += kSleepSliceMs)
      std::this_thread::sleep_for(std::chrono::milliseconds(kSleepSliceMs));
  }
  ++kv_epoch_;
  lost_ = KvLost{kv_epoch_, why.message()};
  const double dt = Now() - t0;
  Log(LogLevel::kWarn, "failover: serving again at epoch {} after {:.3f} s", epoch_, dt);
  std::lock_guard<std::mutex> lk(mu_);
  stats_.unavailable.clear();
  if (planned) return Status::Ok();
  stats_.last_recovery_s = dt;
  stats_.recovery_s_total += dt;
  stats_.recovery_s_max = std::max(stats_.recovery_s_max, dt);
  return Status::Ok();
}

void FailoverExecutor::CountReplay(const Batch& batch) {
  if (computed_.size() > kMaxTrackedSeqs) computed_.clear();
  int64_t replayed = 0;
  for (const SeqChunk& c : batch.chunks) {
    const int32_t end = c.pos0 + c.n_tokens;
    auto r = replay_.find(c.seq_id);
    if (r != replay_.end()) {
      replayed += std::max(0, std::min(end, r->second) - std::min(c.pos0, r->second));
      if (end >= r->second) replay_.erase(r);
    }
    int32_t& done = computed_[c.seq_id];
    done = std::max(done, end);
  }
  if (replayed > 0) {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.replayed_tokens += replayed;
  }
}

Status FailoverExecutor::Submit(const StepInput& in) {
  if (lost_) return Status::Ok();  // void: the next Collect reports the loss
  const bool drain = replan_.exchange(false), rebalance = rebalance_.exchange(false);
  if (drain || rebalance) {
    // Planned: re-plan now (steps in flight are voided and replayed with the others).
    return Recover(Errorf("{}", drain ? "a node was drained" : "rebalancing onto every live node"),
                   drain, rebalance);
  }
  if (!inner_) return Recover(Errorf("no plan"));
  CountReplay(in.batch);
  const Status s = inner_->Submit(in);
  return s.ok() ? s : Recover(s);
}

Status FailoverExecutor::Collect(StepOutput* out) {
  if (!lost_) {
    const Status s = inner_ ? inner_->Collect(out) : Errorf("no plan");
    if (s.ok()) return s;
    SHOAL_RETURN_IF_ERROR(Recover(s));
  }
  out->logits.clear();
  out->kv_lost = std::move(lost_);
  lost_.reset();
  return Status::Ok();
}

FailoverStats FailoverExecutor::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  FailoverStats out = stats_;
  std::vector<net::HeartbeatMonitor::PeerState> states;
  if (inner_) {
    states = inner_->LinkStates();
    const std::vector<ProcessMemory> mem = inner_->LinkMemory();  // [node of the plan]
    const std::vector<NodeLoad> load = inner_->LinkLoad();
    const std::vector<NodeLoadRate> rate = inner_->LinkLoadRates();
    for (const planner::Stage& st : stats_.plan.stages) {
      auto at = [](const auto& v, int32_t i) {
        return i >= 0 && static_cast<size_t>(i) < v.size()
                   ? v[static_cast<size_t>(i)]
                   : typename std::decay_t<decltype(v)>::value_type{};
      };
      out.stage_memory.push_back(at(mem, st.node));
      out.member_memory.emplace_back();
      out.member_load.emplace_back();
      out.member_rate.emplace_back();
      for (int32_t n : StageNodes(st)) {
        out.member_memory.back().push_back(at(mem, n));
        out.member_load.back().push_back(at(load, n));
        out.member_rate.back().push_back(at(rate, n));
      }
    }
  }
  for (size_t i = 0; i < active_.size(); ++i) {
    MemberState m;
    m.address = active_[i];
    auto n = names_.find(m.address);
    m.name = n == names_.end() ? m.address : n->second;
    m.role = "spare";
    for (size_t s = 0; s < stats_.member_addresses.size(); ++s) {
      const auto& ms = stats_.member_addresses[s];
      for (size_t k = 0; k < ms.size(); ++k)
        if (ms[k] == m.address)
          m.role = ms.size() > 1 ? fmt::format("stage {} member {}", s, k)
                                 : "stage " + std::to_string(s);
    }
    if (std::find(drained_.begin(), drained_.end(), m.address) != drained_.end())
      m.role = "draining";
    auto h = health_.find(m.address);
    m.health = i < states.size() && inner_ ? net::PeerHealthName(states[i].health)
                                           : (h == health_.end() ? "unknown" : h->second);
    out.members.push_back(std::move(m));
  }
  for (const std::string& a : standby_) {
    MemberState m;
    m.address = a;
    auto n = names_.find(a);
    m.name = n == names_.end() ? a : n->second;
    m.role = "standby";
    auto h = health_.find(a);
    m.health = h == health_.end() ? "unknown" : h->second;
    out.members.push_back(std::move(m));
  }
  return out;
}

std::vector<StageLoad> FailoverExecutor::StageLoads() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stage_stats_ ? stage_stats_->Snapshot() : std::vector<StageLoad>{};
}

std::vector<std::string> FailoverExecutor::StageNames() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stage_names_;
}

std::string FailoverExecutor::Unavailable() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_.unavailable;
}

}  // namespace shoal::cluster
