// HeartbeatMonitor tests on a FakeClock: alive -> suspect -> dead, sticky death, config checks.
#include "net/heartbeat.h"

#include <gtest/gtest.h>

namespace shoal::net {
namespace {

constexpr int64_t kSecond = 1'000'000;

PeerHealth HealthOf(const HeartbeatMonitor& m, const std::string& peer) {
  Result<PeerHealth> h = m.Health(peer);
  EXPECT_TRUE(h.ok()) << h.status().message();
  return h.ok() ? *h : PeerHealth::kDead;
}

TEST(HeartbeatTest, SuspectThenDeadAfterMissedIntervals) {
  FakeClock clock(100 * kSecond);
  Result<HeartbeatMonitor> m = HeartbeatMonitor::Create(&clock, {kSecond, 2, 5});
  ASSERT_TRUE(m.ok());
  m->Add("upstream");
  m->Add("coordinator");
  EXPECT_EQ(HealthOf(*m, "upstream"), PeerHealth::kAlive);
  clock.Advance(kSecond + kSecond / 2);  // one missed interval: still alive
  EXPECT_EQ(HealthOf(*m, "upstream"), PeerHealth::kAlive);
  m->Heard("coordinator");
  clock.Advance(kSecond / 2);  // 2 intervals silent
  EXPECT_EQ(HealthOf(*m, "upstream"), PeerHealth::kSuspect);
  EXPECT_EQ(HealthOf(*m, "coordinator"), PeerHealth::kAlive);
  m->Heard("upstream");  // suspect recovers
  EXPECT_EQ(HealthOf(*m, "upstream"), PeerHealth::kAlive);
  clock.Advance(5 * kSecond - 1);
  EXPECT_EQ(HealthOf(*m, "upstream"), PeerHealth::kSuspect);
  clock.Advance(1);
  EXPECT_EQ(HealthOf(*m, "upstream"), PeerHealth::kDead);

  const auto states = m->Check();
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0].peer, "coordinator");
  EXPECT_EQ(states[0].health, PeerHealth::kDead);  // silent 5.5 s
  EXPECT_EQ(states[1].peer, "upstream");
  EXPECT_EQ(states[1].missed_intervals, 5);
}

TEST(HeartbeatTest, DeathIsStickyUntilReadded) {
  FakeClock clock;
  Result<HeartbeatMonitor> m = HeartbeatMonitor::Create(&clock, {kSecond, 1, 3});
  ASSERT_TRUE(m.ok());
  m->Add("n1");
  clock.Advance(3 * kSecond);
  m->Heard("n1");  // too late
  EXPECT_EQ(HealthOf(*m, "n1"), PeerHealth::kDead);
  clock.Advance(kSecond);
  m->Heard("n1");
  EXPECT_EQ(HealthOf(*m, "n1"), PeerHealth::kDead);
  m->Add("n1");
  EXPECT_EQ(HealthOf(*m, "n1"), PeerHealth::kAlive);
  m->Remove("n1");
  EXPECT_FALSE(m->Health("n1").ok());
  m->Heard("unknown");  // ignored
  EXPECT_TRUE(m->Check().empty());
}

TEST(HeartbeatTest, SendDueEveryInterval) {
  FakeClock clock(10 * kSecond);
  Result<HeartbeatMonitor> m = HeartbeatMonitor::Create(&clock, {kSecond, 2, 5});
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->SendDue(10 * kSecond - kSecond / 2));
  EXPECT_TRUE(m->SendDue(9 * kSecond));
}

TEST(HeartbeatTest, RejectsBadConfig) {
  FakeClock clock;
  EXPECT_FALSE(HeartbeatMonitor::Create(&clock, {0, 2, 5}).ok());
  EXPECT_FALSE(HeartbeatMonitor::Create(&clock, {kSecond, 0, 5}).ok());
  EXPECT_FALSE(HeartbeatMonitor::Create(&clock, {kSecond, 5, 5}).ok());
  EXPECT_FALSE(HeartbeatMonitor::Create(nullptr, {}).ok());
  EXPECT_TRUE(HeartbeatMonitor::Create(&clock, {}).ok());
}

}  // namespace
}  // namespace shoal::net
