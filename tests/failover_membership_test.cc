// FailoverExecutor over real NodeAgents on loopback, membership: a join or Rebalance() re-plans
// onto every live node with the tokens of an undisturbed run; standbys are probed between
// failovers, less often while they do not answer; joins beyond the standby cap are refused.
#include <atomic>

#include "failover_fixture.h"

namespace shoal::cluster::failover_test {
namespace {

using ::testing::HasSubstr;

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

}  // namespace
}  // namespace shoal::cluster::failover_test
