// LinkWatch over real loopback sockets: answered pings keep a link alive, silence makes it
// suspect then dead, a closed link is dead at once, and step results are queued per link.
#include "cluster/link_watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace shoal::cluster {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kWaitMs = 5'000;  // anything immediate on loopback, on a loaded CI machine

struct Pair {
  std::unique_ptr<net::Listener> listener;
  std::shared_ptr<net::Conn> coordinator, node;
};

Pair MakePair() {
  Pair p;
  p.listener = std::move(*net::Listener::Listen("127.0.0.1", 0));
  p.coordinator = std::move(*net::Conn::Connect("127.0.0.1", p.listener->port(), kWaitMs));
  p.node = std::move(*p.listener->Accept(kWaitMs));
  return p;
}

// The node's side: answers every ping until stopped (or sends nothing while `mute`).
struct Echo {
  explicit Echo(std::shared_ptr<net::Conn> c) : conn(std::move(c)) {
    thread = std::thread([this] {
      for (int i = 0; i < 10'000 && !stop; ++i) {  // bounded: 10,000 x 10 ms
        auto f = conn->Recv(10);
        if (!f.ok()) return;
        if (*f && (*f)->type == net::MsgType::kHeartbeat && !mute) {
          net::Frame pong;
          pong.type = net::MsgType::kHeartbeat;
          if (!conn->Send(pong).ok()) return;
        }
      }
    });
  }
  ~Echo() {
    stop = true;
    thread.join();
  }
  std::shared_ptr<net::Conn> conn;
  std::atomic<bool> stop{false}, mute{false};
  std::thread thread;
};

// Wide margins between the thresholds: the checks below sit 200 ms or more from each edge.
WatchConfig FastConfig() { return WatchConfig{20, 200, 1'000}; }

TEST(LinkWatch, ConfigMustBeOrdered) {
  EXPECT_TRUE(CheckWatchConfig(WatchConfig{}).ok());
  EXPECT_FALSE(CheckWatchConfig(WatchConfig{0, 100, 300}).ok());
  EXPECT_FALSE(CheckWatchConfig(WatchConfig{20, 300, 300}).ok());
  EXPECT_FALSE(CheckWatchConfig(WatchConfig{200, 100, 300}).ok());
}

TEST(LinkWatch, AnsweredPingsStayAliveAndResultsArrive) {
  Pair p = MakePair();
  Echo echo(p.node);
  LinkWatch w({p.coordinator}, {"n0"}, FastConfig());
  std::this_thread::sleep_for(std::chrono::milliseconds(1'200));  // > dead_ms of pings
  EXPECT_EQ(w.States()[0].health, net::PeerHealth::kAlive);
  EXPECT_EQ(w.DeadReason(), "");
  net::Frame r;
  r.type = net::MsgType::kStepResult;
  r.tag = {0, 3, 7};
  ASSERT_TRUE(p.node->Send(r).ok());
  auto got = w.NextResult(0, kWaitMs);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->tag, (net::DataTag{0, 3, 7}));
}

TEST(LinkWatch, SilentNodeIsSuspectThenDead) {
  Pair p = MakePair();
  Echo echo(p.node);
  LinkWatch w({p.coordinator}, {"n0"}, FastConfig());
  echo.mute = true;  // a stopped process: the socket stays open, nothing answers
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(w.States()[0].health, net::PeerHealth::kSuspect);
  const auto t0 = std::chrono::steady_clock::now();
  auto got = w.NextResult(0, kWaitMs);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("n0: silent"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(3'000));
  EXPECT_EQ(w.States()[0].health, net::PeerHealth::kDead);
}

TEST(LinkWatch, SuspectNodeThatAnswersAgainRecovers) {
  Pair p = MakePair();
  Echo echo(p.node);
  LinkWatch w({p.coordinator}, {"n0"}, FastConfig());
  echo.mute = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(w.States()[0].health, net::PeerHealth::kSuspect);
  echo.mute = false;  // SIGCONT within the grace period
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(w.States()[0].health, net::PeerHealth::kAlive);
}

TEST(LinkWatch, ClosedLinkIsDeadAtOnce) {
  Pair p = MakePair();
  LinkWatch w({p.coordinator}, {"n7"}, WatchConfig{100, 1'000, 10'000});
  p.node->Shutdown();  // a killed process: the kernel closes its sockets
  const auto t0 = std::chrono::steady_clock::now();
  auto got = w.NextResult(0, kWaitMs);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("n7: link lost"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1'000));
}

TEST(LinkWatch, NoResultWithinTheTimeoutIsAnError) {
  Pair p = MakePair();
  Echo echo(p.node);
  LinkWatch w({p.coordinator}, {"n0"}, FastConfig());
  auto got = w.NextResult(0, 50);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("no step result"));
}

}  // namespace
}  // namespace shoal::cluster

namespace shoal::cluster {
namespace {

// A node's rates come from its counters' change over the window: busy and collective fractions
// of wall time and tokens per second; a restarted node (counters back to 0) reads as no data.
TEST(NodeLoadWindow, RatesOverTheWindow) {
  NodeLoadWindow w(10'000'000'000);
  EXPECT_EQ(w.Rate().seconds, 0.0);
  const int64_t s = 1'000'000'000;
  w.Push(0, {0, 0, 0, 0, 0});
  w.Push(2 * s, {200, s, s / 4, 10, 1000});
  NodeLoadRate r = w.Rate();
  EXPECT_DOUBLE_EQ(r.seconds, 2.0);
  EXPECT_DOUBLE_EQ(r.busy_fraction, 0.5);
  EXPECT_DOUBLE_EQ(r.collective_fraction, 0.125);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 100.0);
  // Past the window the oldest samples go: the rate covers the last 10 s only.
  w.Push(11 * s, {200, s, s / 4, 10, 1000});
  w.Push(13 * s, {400, 3 * s, s / 4, 10, 1000});
  r = w.Rate();
  EXPECT_DOUBLE_EQ(r.seconds, 11.0);  // from the 2 s sample, the last one at or before 3 s
  EXPECT_NEAR(r.busy_fraction, 2.0 / 11.0, 1e-12);
  w.Push(14 * s, {0, 0, 0, 0, 0});  // the node restarted
  EXPECT_EQ(w.Rate().seconds, 0.0);
}

}  // namespace
}  // namespace shoal::cluster
