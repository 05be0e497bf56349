// FailoverExecutor driven directly over real NodeAgents on loopback, in this process: a stage
// lost mid-stream (its agent stopped, so its links close) moves to the standby at the next plan
// epoch and the engine replays (kv_epoch), with exactly the tokens of an undisturbed run; a
// node that goes silent while loading its assignment (a stopped process) is given up within
// the dead time, not the 10-minute step timeout, while one that loads slowly but answers pings
// is waited for; with every node lost, Unavailable() (the server's 503) says why until a node
// joins, and serving resumes; a join or Rebalance() re-plans onto every live node; standbys are
// probed between failovers.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "cluster/failover_executor.h"
#include "cluster/node_agent.h"
#include "cluster/wire.h"
#include "engine/engine.h"
#include "model/model.h"
#include "modelgen/synth.h"
#include "net/bytes.h"
#include "planner/model_profile.h"

namespace shoal::cluster {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using Tokens = std::vector<std::vector<int32_t>>;  // [request] generated ids

constexpr int32_t kLayers = 6;     // up to 6 stages
constexpr int kMaxTokens = 40;     // generated per request: a few dozen steps after the fault
constexpr int kFaultStep = 8;      // after the prefill and a few decode steps
constexpr int64_t kDeadMs = 1000;  // the default dead time
// Each node's memory limit: the planner needs one; the 6-layer tiny model's stages take ~40 MiB.
constexpr uint64_t kNodeMem = uint64_t{256} << 20;

// Pings every 20 ms, suspect after 200 ms: loopback answers in well under a millisecond, a
// loaded 2-core CI machine within tens of milliseconds.
WatchConfig FastWatch() { return WatchConfig{20, 200, kDeadMs}; }

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

net::ClusterKey TestKey() {
  std::vector<uint8_t> k(32);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(17 * i + 3);
  return *net::ClusterKey::FromBytes(k);
}

// A real `shoal node` agent serving on loopback until Kill (stopping it closes its links, as
// the kernel does for a killed process).
class LiveNode {
 public:
  LiveNode(const std::string& dir, const std::string& name) {
    NodeOptions o;
    o.port = 0;
    o.model_dir = dir;
    o.name = name;
    o.measure = false;
    o.mem_limit = kNodeMem;
    auto a = NodeAgent::Start(o, TestKey());
    EXPECT_TRUE(a.ok()) << a.status().message();
    agent_ = std::move(*a);
    address_ = "127.0.0.1:" + std::to_string(agent_->port());
    thread_ = std::thread([this] { (void)agent_->Run(); });
  }
  ~LiveNode() { Kill(); }
  void Kill() {
    if (!agent_) return;
    agent_->Stop();
    thread_.join();
    agent_.reset();
  }
  const std::string& address() const { return address_; }

 private:
  std::unique_ptr<NodeAgent> agent_;
  std::thread thread_;
  std::string address_;
};

// The greeting a node sends first on every link: its NodeInfo with test figures.
net::Frame JoinFrame(const std::string& name, const std::string& address) {
  planner::NodeInfo info;
  info.name = name;
  info.address = address;
  info.n_threads = 1;
  info.mem_limit = kNodeMem;
  info.mem_bw = 10e9;
  info.matmul_flops = {{DType::kQ4_0, 50e9}};
  net::Frame join;
  join.type = net::MsgType::kControl;
  join.payload = EncodeJoin(planner::NodeInfoToJson(info));
  return join;
}

// A scripted node on a real socket (the behaviour a NodeAgent cannot show in-process): it
// authenticates and greets like a node and, on its assignment, either goes silent as a
// SIGSTOPped process does (its sockets stay open, nothing answers, no new link gets past the
// handshake) or keeps answering pings and reports success after load_ms.
class ScriptedNode {
 public:
  enum class OnAssign { kFreeze, kSlowOk };
  ScriptedNode(OnAssign mode, int64_t load_ms = 0) : mode_(mode), load_ms_(load_ms) {
    listener_ = std::move(*net::Listener::Listen("127.0.0.1", 0));
    address_ = "127.0.0.1:" + std::to_string(listener_->port());
    accept_ = std::thread([this] { AcceptLoop(); });
  }
  ~ScriptedNode() {
    stop_ = true;
    accept_.join();
    std::lock_guard<std::mutex> lk(mu_);
    for (std::thread& t : links_) t.join();
  }
  const std::string& address() const { return address_; }
  bool assigned() const { return assigned_; }

 private:
  void AcceptLoop() {
    while (!stop_) {
      if (frozen_) {  // the kernel still completes connects into the backlog
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      auto c = listener_->Accept(20);
      if (!c.ok() || !*c) continue;
      std::shared_ptr<net::Conn> conn(std::move(*c));
      std::lock_guard<std::mutex> lk(mu_);
      links_.emplace_back([this, conn] { Serve(conn); });
    }
  }
  void Serve(std::shared_ptr<net::Conn> c) {
    if (!net::AuthenticateAcceptor(*c, TestKey()).ok()) return;
    if (!c->Send(JoinFrame("scripted", address_)).ok()) return;
    std::optional<Clock::time_point> loading;
    while (!stop_) {
      if (frozen_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      if (loading && Seconds(*loading) * 1e3 >= static_cast<double>(load_ms_)) {
        loading.reset();
        net::Frame r;
        r.type = net::MsgType::kControl;
        r.payload = EncodeAssignResult(true, "");
        if (!c->Send(r).ok()) return;
      }
      auto f = c->Recv(5);
      if (!f.ok()) return;
      if (!*f) continue;
      if ((*f)->type == net::MsgType::kHeartbeat) {
        net::Frame pong;
        pong.type = net::MsgType::kHeartbeat;
        if (!c->Send(pong).ok()) return;
      } else if ((*f)->type == net::MsgType::kControl) {
        auto t = ControlTypeOf((*f)->payload);
        if (!t.ok() || *t != ControlType::kAssign) continue;
        assigned_ = true;
        if (mode_ == OnAssign::kFreeze) frozen_ = true;
        if (mode_ == OnAssign::kSlowOk) loading = Clock::now();
      }
    }
  }

  OnAssign mode_;
  int64_t load_ms_;
  std::unique_ptr<net::Listener> listener_;
  std::string address_;
  std::atomic<bool> stop_{false}, frozen_{false}, assigned_{false};
  std::thread accept_;
  std::mutex mu_;
  std::vector<std::thread> links_;  // guarded by mu_
};

// A standby address that either refuses every probe (accepts and hangs up, as a wrong or
// bogus address behind a firewall would) or answers like a node; counts the probes.
class FlakyStandby {
 public:
  FlakyStandby() {
    listener_ = std::move(*net::Listener::Listen("127.0.0.1", 0));
    address_ = "127.0.0.1:" + std::to_string(listener_->port());
    thread_ = std::thread([this] {
      while (!stop_) {
        auto c = listener_->Accept(20);
        if (!c.ok() || !*c) continue;
        ++probes_;
        if (!answer_ || !net::AuthenticateAcceptor(**c, TestKey()).ok()) continue;
        (void)(*c)->Send(JoinFrame("flaky", address_));
        (void)(*c)->Recv(200);  // the probe hangs up once it has read the info
      }
    });
  }
  ~FlakyStandby() {
    stop_ = true;
    thread_.join();
  }
  const std::string& address() const { return address_; }
  int probes() const { return probes_; }
  void set_answer(bool answer) { answer_ = answer; }

 private:
  std::unique_ptr<net::Listener> listener_;
  std::string address_;
  std::atomic<bool> stop_{false}, answer_{false};
  std::atomic<int> probes_{0};
  std::thread thread_;
};

// A man in the middle on 127.0.0.2 at a node's own port (so the node's target check passes),
// forwarding to the node on 127.0.0.1 frame by frame. On the first connection it flips the last
// byte (in the tag) of the node's `flip_at`-th frame to the coordinator; later connections pass
// unchanged. Skipped by the caller when 127.0.0.2 cannot be bound.
class TamperRelay {
 public:
  TamperRelay(uint16_t port, size_t flip_at) : port_(port), flip_at_(flip_at) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
    ok_ = bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd_, 16) == 0;
    if (ok_) thread_ = std::thread([this] { Run(); });
  }
  ~TamperRelay() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lk(mu_);
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    for (std::thread& t : pumps_) t.join();
    for (int fd : fds_) close(fd);
    close(fd_);
  }
  bool ok() const { return ok_; }
  std::string address() const { return "127.0.0.2:" + std::to_string(port_); }
  bool flipped() const { return flipped_; }

 private:
  void Run() {
    for (int n = 0; !stop_;) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      const int in = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (in < 0) continue;
      const int out = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port_);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(out, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        close(in);
        close(out);
        continue;
      }
      const bool tamper = n++ == 0;
      std::lock_guard<std::mutex> lk(mu_);
      fds_.insert(fds_.end(), {in, out});
      pumps_.emplace_back([this, in, out] { Pump(in, out, false); });
      pumps_.emplace_back([this, in, out, tamper] { Pump(out, in, tamper); });
    }
  }
  static bool ReadExact(int fd, uint8_t* p, size_t n) {
    for (ssize_t r; n > 0; p += r, n -= static_cast<size_t>(r))
      if ((r = recv(fd, p, n, 0)) <= 0) return false;
    return true;
  }
  void Pump(int from, int to, bool tamper) {
    for (size_t index = 0;; ++index) {
      std::vector<uint8_t> f(net::kBaseHeaderSize);
      if (!ReadExact(from, f.data(), f.size())) break;
      const bool data = net::IsDataType(static_cast<net::MsgType>(f[5]));
      const size_t rest = (data ? net::kDataHeaderSize : 0) + net::LoadLE32(f.data() + 8);
      f.resize(f.size() + rest);
      if (!ReadExact(from, f.data() + net::kBaseHeaderSize, rest)) break;
      if (tamper && index == flip_at_) {
        f.back() ^= 0x01;
        flipped_ = true;
      }
      if (send(to, f.data(), f.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(f.size())) break;
    }
    shutdown(to, SHUT_WR);
  }

  uint16_t port_;
  size_t flip_at_;
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false}, flipped_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<int> fds_;            // guarded by mu_
  std::vector<std::thread> pumps_;  // guarded by mu_
};

class FailoverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/shoal-failover-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    SynthOptions so;
    so.preset = "tiny";
    so.type = DType::kQ8_0;
    so.seed = 5;
    so.n_layer = kLayers;
    so.n_threads = 1;
    const Status s = SynthesizeModel(so, *dir_ + "/m.gguf");
    ASSERT_TRUE(s.ok()) << s.message();
    auto f = gguf::File::Open(*dir_ + "/m.gguf");
    ASSERT_TRUE(f.ok()) << f.status().message();
    file_ = f->release();
    auto prof = planner::ProfileFromGguf(*file_);
    ASSERT_TRUE(prof.ok()) << prof.status().message();
    hp_ = new HParams(prof->hp);
    // The reference: one process, the whole model, no fault.
    auto model = Model::Load(*file_, LoadOptions{});
    ASSERT_TRUE(model.ok()) << model.status().message();
    auto engine = Engine::Create(model->get(), Config(), {});
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    want_ = new Tokens(RunAll(**engine));
  }
  static void TearDownTestSuite() {
    delete want_;
    delete hp_;
    delete file_;
    std::error_code ec;
    std::filesystem::remove_all(*dir_, ec);
    delete dir_;
  }

  static EngineConfig Config() {
    EngineConfig c;
    c.n_threads = 1;
    c.n_ctx = 256;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 256;
    return c;
  }

  // Two greedy and two seeded-sampling requests.
  static std::vector<Request> Requests() {
    std::vector<Request> out;
    for (int i = 0; i < 4; ++i) {
      Request r;
      r.prompt = {1, 20 + i, 300 + 7 * i, 45, 9, 1000 + i, 77};
      r.sampling.temperature = i % 2 == 0 ? 0.0f : 0.8f;
      r.sampling.seed = 100 + static_cast<uint64_t>(i);
      r.sampling.max_tokens = kMaxTokens;
      out.push_back(r);
    }
    return out;
  }

  // Runs Requests() to completion; at_step(k) runs before step k (faults, joins).
  static Tokens RunAll(Engine& e, const std::function<void(int)>& at_step = nullptr) {
    const std::vector<Request> reqs = Requests();
    std::map<int64_t, size_t> slot;
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto id = e.Add(reqs[i]);
      EXPECT_TRUE(id.ok()) << id.status().message();
      if (id.ok()) slot[*id] = i;
    }
    Tokens out(reqs.size());
    for (int step = 0; !e.idle() && step < 10'000; ++step) {
      if (at_step) at_step(step);
      auto ev = e.Step();
      EXPECT_TRUE(ev.ok()) << ev.status().message();
      if (!ev.ok()) break;
      for (const TokenEvent& t : *ev) out[slot.at(t.id)].push_back(t.token);
    }
    return out;
  }

  static FailoverOptions Options(std::vector<std::string> nodes,
                                 std::vector<std::string> standby = {}) {
    const EngineConfig c = Config();
    FailoverOptions fo;
    fo.cluster.nodes = std::move(nodes);
    fo.cluster.model_file = "m.gguf";
    fo.cluster.plan.max_num_seqs = c.max_num_seqs;
    fo.cluster.plan.max_model_len = c.n_ctx;
    fo.cluster.plan.block_size = c.block_size;
    fo.cluster.plan.kv_dtype = c.kv_dtype;
    fo.cluster.plan.max_batched_tokens = c.max_num_batched_tokens;
    fo.cluster.plan.link_dtype = planner::LinkDType::kF32;  // bit-exact hops
    fo.cluster.connect_timeout_ms = 5'000;
    fo.cluster.watch = FastWatch();
    fo.standby = std::move(standby);
    fo.retry_ms = 100;
    return fo;
  }

  // An engine over a FailoverExecutor (*fx: the executor it owns).
  static std::unique_ptr<Engine> ClusterEngine(const FailoverOptions& fo, FailoverExecutor** fx) {
    auto ex = FailoverExecutor::Create(fo, *file_, TestKey(), hp_->n_vocab, hp_->n_embd);
    EXPECT_TRUE(ex.ok()) << ex.status().message();
    if (!ex.ok()) return nullptr;
    *fx = ex->get();
    const int32_t blocks = static_cast<int32_t>(planner::KvTokensPerLayer(fo.cluster.plan) /
                                                fo.cluster.plan.block_size);
    return std::make_unique<Engine>(std::move(*ex), Config(), blocks, std::vector<int32_t>{});
  }

  static std::string* dir_;
  static gguf::File* file_;
  static HParams* hp_;
  static Tokens* want_;
};

std::string* FailoverTest::dir_ = nullptr;
gguf::File* FailoverTest::file_ = nullptr;
HParams* FailoverTest::hp_ = nullptr;
Tokens* FailoverTest::want_ = nullptr;

const MemberState* Member(const FailoverStats& s, const std::string& address) {
  for (const MemberState& m : s.members)
    if (m.address == address) return &m;
  return nullptr;
}

TEST_F(FailoverTest, UndisturbedClusterMatchesOneProcess) {
  LiveNode n1(*dir_, "n1"), n2(*dir_, "n2");
  FailoverExecutor* fx = nullptr;
  auto e = ClusterEngine(Options({n1.address(), n2.address()}), &fx);
  ASSERT_TRUE(e);
  EXPECT_EQ(RunAll(*e), *want_);
  EXPECT_EQ(fx->stats().epoch, 1u);
  EXPECT_EQ(fx->kv_epoch(), 0u);
  ASSERT_EQ(want_->size(), 4u);
  for (const auto& t : *want_) EXPECT_EQ(t.size(), static_cast<size_t>(kMaxTokens));
}

TEST_F(FailoverTest, LostStageMovesToTheStandbyAndReplays) {
  LiveNode n1(*dir_, "n1"), n2(*dir_, "n2"), n3(*dir_, "n3");
  FailoverExecutor* fx = nullptr;
  auto e = ClusterEngine(Options({n1.address(), n2.address()}, {n3.address()}), &fx);
  ASSERT_TRUE(e);
  EXPECT_EQ(fx->stats().stage_addresses, (std::vector<std::string>{n1.address(), n2.address()}));
  const Tokens got = RunAll(*e, [&](int step) {
    if (step == kFaultStep) n2.Kill();
  });
  EXPECT_EQ(got, *want_);  // no token lost, repeated or changed
  const FailoverStats s = fx->stats();
  EXPECT_EQ(s.epoch, 2u);
  EXPECT_EQ(s.failovers, 1);
  EXPECT_EQ(s.rebalances, 0);
  EXPECT_THAT(s.last_failure, HasSubstr("n2"));
  EXPECT_EQ(s.stage_addresses, (std::vector<std::string>{n1.address(), n3.address()}));
  EXPECT_EQ(fx->kv_epoch(), 1u);  // the engine dropped its KV once...
  EXPECT_EQ(e->stats().kv_losses_total, 1);
  EXPECT_GT(s.replayed_tokens, 0);  // ...and recomputed the sequences from their tokens
  EXPECT_GT(s.last_recovery_s, 0);
  const MemberState* lost = Member(s, n2.address());
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->role, "standby");  // taken again if it comes back
  EXPECT_EQ(lost->health, "dead");
  EXPECT_EQ(fx->Unavailable(), "");
}

TEST_F(FailoverTest, NothingFitsIsUnavailableUntilANodeJoins) {
  auto n1 = std::make_unique<LiveNode>(*dir_, "n1");
  FailoverExecutor* fx = nullptr;
  auto e = ClusterEngine(Options({n1->address()}), &fx);
  ASSERT_TRUE(e);
  std::atomic<bool> killed{false};
  Tokens got;
  std::thread engine([&] {  // blocks inside the executor while nothing can serve
    got = RunAll(*e, [&](int step) {
      if (step != kFaultStep) return;
      n1->Kill();
      killed = true;
    });
  });
  std::string why;
  const auto t0 = Clock::now();
  while (why.empty() && Seconds(t0) < 30) {
    if (killed) why = fx->Unavailable();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_THAT(why, HasSubstr("cannot serve yet"));
  const MemberState* m = Member(fx->stats(), n1->address());
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->health, "dead");
  LiveNode n2(*dir_, "n2");  // a new machine joins; serving resumes on it
  ASSERT_TRUE(fx->Join(n2.address(), /*standby=*/true).ok());
  engine.join();
  EXPECT_EQ(got, *want_);
  EXPECT_EQ(fx->Unavailable(), "");
  const FailoverStats s = fx->stats();
  EXPECT_EQ(s.failovers, 1);
  EXPECT_EQ(s.stage_addresses, std::vector<std::string>{n2.address()});
  EXPECT_EQ(fx->kv_epoch(), 1u);
}

TEST_F(FailoverTest, JoinRebalancesOntoTheNewNode) {
  LiveNode n1(*dir_, "n1"), n2(*dir_, "n2");
  std::unique_ptr<LiveNode> n3;
  FailoverExecutor* fx = nullptr;
  auto e = ClusterEngine(Options({n1.address(), n2.address()}), &fx);
  ASSERT_TRUE(e);
  const Tokens got = RunAll(*e, [&](int step) {
    if (step != kFaultStep) return;
    n3 = std::make_unique<LiveNode>(*dir_, "n3");
    const Status s = fx->Join(n3->address(), /*standby=*/false);
    EXPECT_TRUE(s.ok()) << s.message();
  });
  EXPECT_EQ(got, *want_);
  const FailoverStats s = fx->stats();
  EXPECT_EQ(s.rebalances, 1);
  EXPECT_EQ(s.failovers, 0);
  EXPECT_EQ(s.epoch, 2u);
  EXPECT_EQ(s.stage_addresses,
            (std::vector<std::string>{n1.address(), n2.address(), n3->address()}));
  EXPECT_EQ(fx->kv_epoch(), 1u);
  EXPECT_EQ(e->stats().kv_losses_total, 1);
  // n3 is a stage now: joining it again is an error.
  EXPECT_FALSE(fx->Join(n3->address(), false).ok());
}

TEST_F(FailoverTest, RebalanceTakesTheStandbys) {
  LiveNode n1(*dir_, "n1"), n2(*dir_, "n2"), n3(*dir_, "n3");
  FailoverExecutor* fx = nullptr;
  auto e = ClusterEngine(Options({n1.address()}, {n2.address(), n3.address()}), &fx);
  ASSERT_TRUE(e);
  const Tokens got = RunAll(*e, [&](int step) {
    if (step == kFaultStep) fx->Rebalance();
  });
  EXPECT_EQ(got, *want_);
  const FailoverStats s = fx->stats();
  EXPECT_EQ(s.rebalances, 1);
  EXPECT_EQ(s.stage_addresses,
            (std::vector<std::string>{n1.address(), n2.address(), n3.address()}));
  for (const MemberState& m : s.members) EXPECT_THAT(m.role, HasSubstr("stage")) << m.address;
}

TEST_F(FailoverTest, NodeSilentWhileLoadingIsGivenUpWithinTheDeadTime) {
  // n2 is lost; the standby takes the assignment and goes silent (SIGSTOP while loading): the
  // coordinator gives it up after the dead time and re-plans over n1 alone.
  LiveNode n1(*dir_, "n1"), n2(*dir_, "n2");
  ScriptedNode frozen(ScriptedNode::OnAssign::kFreeze);
  FailoverExecutor* fx = nullptr;
  auto e = ClusterEngine(Options({n1.address(), n2.address()}, {frozen.address()}), &fx);
  ASSERT_TRUE(e);
  Clock::time_point t_kill;
  const Tokens got = RunAll(*e, [&](int step) {
    if (step != kFaultStep) return;
    n2.Kill();
    t_kill = Clock::now();
  });
  const double recovered = Seconds(t_kill);
  EXPECT_EQ(got, *want_);
  EXPECT_TRUE(frozen.assigned());
  const FailoverStats s = fx->stats();
  EXPECT_EQ(s.failovers, 1);
  EXPECT_EQ(s.stage_addresses, std::vector<std::string>{n1.address()});
  EXPECT_GE(s.epoch, 3u);  // the frozen node's epoch, then the one without it
  // The dead time plus a probe and two loads, with a wide margin for a loaded machine; the old
  // bound was the 10-minute step timeout.
  EXPECT_LT(recovered, 15.0);
  EXPECT_GT(recovered, kDeadMs / 1e3);
}

TEST_F(FailoverTest, StandbysAreProbedBetweenFailovers) {
  LiveNode n1(*dir_, "n1");
  auto n2 = std::make_unique<LiveNode>(*dir_, "n2");
  FailoverExecutor* fx = nullptr;
  auto e = ClusterEngine(Options({n1.address()}, {n2->address()}), &fx);
  ASSERT_TRUE(e);
  // health of `address` becomes `want` within 5 s (probes every second), with no step run.
  auto becomes = [&](const std::string& address, const std::string& want) {
    for (const auto t0 = Clock::now(); Seconds(t0) < 5;) {
      const MemberState* m = Member(fx->stats(), address);
      if (m && m->health == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  };
  EXPECT_TRUE(becomes(n2->address(), "alive"));
  const std::string lost = n2->address();
  n2->Kill();
  EXPECT_TRUE(becomes(lost, "dead"));
  LiveNode n3(*dir_, "n3");
  ASSERT_TRUE(fx->Join(n3.address(), /*standby=*/true).ok());
  EXPECT_TRUE(becomes(n3.address(), "alive"));
  EXPECT_EQ(fx->stats().failovers, 0);
  EXPECT_EQ(fx->stats().epoch, 1u);
}

TEST_F(FailoverTest, ATamperedFrameFailsTheLinkAndTheStreamReplaysUnchanged) {
  // n2 is reached through a relay that flips one bit of one frame n2 sends (after the
  // handshake, ~20 heartbeats in): the coordinator's link fails its integrity check, the
  // failover replays, and the tokens are the undisturbed run's.
  LiveNode n1(*dir_, "n1"), n2(*dir_, "n2"), n3(*dir_, "n3");
  const uint16_t port2 = static_cast<uint16_t>(std::stoi(n2.address().substr(10)));
  TamperRelay relay(port2, 25);
  if (!relay.ok()) GTEST_SKIP() << "cannot bind 127.0.0.2:" << port2;
  FailoverExecutor* fx = nullptr;
  auto e = ClusterEngine(Options({n1.address(), relay.address()}, {n3.address()}), &fx);
  ASSERT_TRUE(e);
  const Tokens got = RunAll(*e, [&](int step) {
    // Hold the stream until the flipped frame has gone by, so the failure lands mid-stream.
    for (const auto t0 = Clock::now(); step == kFaultStep && !relay.flipped() && Seconds(t0) < 5;)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  EXPECT_TRUE(relay.flipped());
  EXPECT_EQ(got, *want_);  // no token lost, repeated or changed
  const FailoverStats s = fx->stats();
  EXPECT_GE(s.failovers, 1);
  EXPECT_THAT(s.last_failure, HasSubstr("integrity check failed"));
  EXPECT_EQ(fx->kv_epoch(), static_cast<uint64_t>(s.failovers));
}

TEST_F(FailoverTest, JoinsBeyondTheStandbyCapAreRefused) {
  LiveNode n1(*dir_, "n1");
  FailoverOptions fo = Options({n1.address()});
  fo.max_standby = 2;
  fo.standby_probe_ms = 0;  // no probing: this test is about the list
  FailoverExecutor* fx = nullptr;
  auto e = ClusterEngine(fo, &fx);
  ASSERT_TRUE(e);
  EXPECT_TRUE(fx->Join("127.0.0.1:1", true).ok());
  EXPECT_TRUE(fx->Join("127.0.0.1:2", true).ok());
  const Status over = fx->Join("127.0.0.1:3", true);
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.message(), HasSubstr("at most 2"));
  EXPECT_FALSE(fx->Join("127.0.0.1:4", /*standby=*/false).ok());  // a rebalancing join too
  ASSERT_TRUE(fx->Drain("127.0.0.1:1").ok());                     // room again
  EXPECT_TRUE(fx->Join("127.0.0.1:3", true).ok());
  EXPECT_EQ(fx->stats().members.size(), 3u);  // n1 and two standbys
}

TEST_F(FailoverTest, AStandbyThatDoesNotAnswerIsProbedLessOften) {
  LiveNode n1(*dir_, "n1");
  FlakyStandby flaky;
  FailoverOptions fo = Options({n1.address()}, {flaky.address()});
  fo.standby_probe_ms = 100;
  fo.probe_backoff_max_ms = 800;
  FailoverExecutor* fx = nullptr;
  auto e = ClusterEngine(fo, &fx);
  ASSERT_TRUE(e);
  // 3 s: every 100 ms would be ~30 probes; doubling to 800 ms makes ~7 (0.1, 0.2, 0.4, 0.8...).
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const int missed = flaky.probes();
  EXPECT_GE(missed, 3);
  EXPECT_LE(missed, 12);
  const MemberState* m = Member(fx->stats(), flaky.address());
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->health, "dead");
  // It answers again: seen within the longest back-off, then probed at the normal rate.
  flaky.set_answer(true);
  bool alive = false;
  for (const auto t0 = Clock::now(); !alive && Seconds(t0) < 5;) {
    m = Member(fx->stats(), flaky.address());
    alive = m && m->health == "alive";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(alive);
  const int before = flaky.probes();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_GE(flaky.probes() - before, 5);  // ~every 100 ms; at the 800 ms back-off it were 2
}

// AssignLayers itself, against scripted nodes.
Result<Cluster> PlanOver(const std::string& address, const ClusterOptions& co,
                         const gguf::File& file) {
  SHOAL_ASSIGN_OR_RETURN(NodeLink l, ConnectNode(address, {}, TestKey(), 5'000));
  std::vector<NodeLink> links;
  links.push_back(std::move(l));
  return PlanCluster(std::move(links), co, file);
}

TEST_F(FailoverTest, AssignmentWaitsForASlowNodeThatAnswers) {
  ScriptedNode slow(ScriptedNode::OnAssign::kSlowOk, 3 * kDeadMs);
  const ClusterOptions co = Options({slow.address()}).cluster;
  auto cl = PlanOver(slow.address(), co, *file_);
  ASSERT_TRUE(cl.ok()) << cl.status().message();
  const auto t0 = Clock::now();
  std::vector<std::string> lost = {"x"};
  const Status s = AssignLayers(*cl, co, &lost);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(lost.empty());
  EXPECT_GE(Seconds(t0), 3 * kDeadMs / 1e3);
  ASSERT_TRUE(cl->watch);
  EXPECT_EQ(cl->watch->DeadReason(), "");  // the same watch goes on for the serving links
}

TEST_F(FailoverTest, AssignmentFailsSoonWhenTheNodeGoesSilent) {
  ScriptedNode frozen(ScriptedNode::OnAssign::kFreeze);
  const ClusterOptions co = Options({frozen.address()}).cluster;
  auto cl = PlanOver(frozen.address(), co, *file_);
  ASSERT_TRUE(cl.ok()) << cl.status().message();
  const auto t0 = Clock::now();
  std::vector<std::string> lost;
  const Status s = AssignLayers(*cl, co, &lost);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(lost, std::vector<std::string>{frozen.address()});
  EXPECT_THAT(s.message(), HasSubstr("silent"));
  EXPECT_LT(Seconds(t0), 5 * kDeadMs / 1e3);
}

}  // namespace
}  // namespace shoal::cluster
