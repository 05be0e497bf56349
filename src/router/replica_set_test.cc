// Replica choice: the same prompt prefix keeps its replica, different prefixes spread, a busy
// affinity replica yields to the least loaded, full and down replicas are skipped, and the
// affinity key reads completions and chat bodies (malformed ones give no key).
#include "router/replica_set.h"

#include <gtest/gtest.h>

#include <set>

namespace shoal::router {
namespace {

std::vector<std::string> Urls(int n) {
  std::vector<std::string> u;
  for (int i = 0; i < n; ++i) u.push_back("http://127.0.0.1:" + std::to_string(9000 + i));
  return u;
}

TEST(ReplicaSet, AffinityKeepsAPrefixOnItsReplicaAndSpreadsOthers) {
  ReplicaSet s(Urls(4), Policy::kAffinity, 8, 4);
  const int a = s.Pick("You are a helpful assistant. Question 1", {});
  for (int k = 0; k < 5; ++k) EXPECT_EQ(s.Pick("You are a helpful assistant. Question 1", {}), a);
  std::set<int> seen;
  for (int k = 0; k < 64; ++k) seen.insert(s.Pick("system prompt number " + std::to_string(k), {}));
  EXPECT_EQ(seen.size(), 4u);  // 64 keys over 4 replicas: every one chosen
}

TEST(ReplicaSet, LoadBoundsAffinityAndLimitsEveryReplica) {
  ReplicaSet s(Urls(2), Policy::kAffinity, 3, 1);
  const std::string key = "shared prefix";
  const int a = s.Pick(key, {});
  s.Start(a);
  s.Start(a);  // a: 2 in flight, the other 0: more than the slack of 1
  EXPECT_EQ(s.Pick(key, {}), 1 - a);
  s.Start(1 - a);
  EXPECT_EQ(s.Pick(key, {}), a);  // 2 against 1: within the slack
  s.Start(a);
  s.Start(1 - a);
  s.Start(1 - a);  // both at the limit of 3
  EXPECT_EQ(s.Pick(key, {}), -1);
  s.Finish(a, false);
  EXPECT_EQ(s.Pick(key, {}), a);
  EXPECT_EQ(s.Pick(key, {a}), -1);  // the other is full, a was tried
  s.SetUp(a, false);
  EXPECT_EQ(s.Pick(key, {}), -1);
  s.Finish(1 - a, true);
  EXPECT_EQ(s.replicas()[static_cast<size_t>(1 - a)].failures, 1);
  EXPECT_EQ(s.Pick(key, {}), 1 - a);
}

TEST(ReplicaSet, RoundRobinAndLeastLoaded) {
  ReplicaSet rr(Urls(3), Policy::kRoundRobin, 0, 0);
  EXPECT_EQ(rr.Pick("x", {}), 0);
  EXPECT_EQ(rr.Pick("x", {}), 1);
  EXPECT_EQ(rr.Pick("x", {}), 2);
  EXPECT_EQ(rr.Pick("x", {}), 0);
  ReplicaSet ll(Urls(3), Policy::kLeastLoaded, 0, 0);
  ll.Start(0);
  ll.Start(1);
  EXPECT_EQ(ll.Pick("x", {}), 2);
}

TEST(AffinityKey, ReadsPromptsAndMessages) {
  EXPECT_EQ(AffinityKey(R"({"prompt": "Once upon a time"})", 4), "Once");
  EXPECT_EQ(AffinityKey(R"({"prompt": ["first", "second"]})", 64), "first");
  EXPECT_EQ(AffinityKey(R"({"prompt": [1, 2, 3]})", 64), "1 2 3 ");
  EXPECT_EQ(AffinityKey(R"({"messages": [{"role": "system", "content": "Be brief."},
                           {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]})",
                        64),
            "Be brief.Hi");
  EXPECT_EQ(AffinityKey("not json", 64), "");
  EXPECT_EQ(AffinityKey(R"([1, 2])", 64), "");
  EXPECT_EQ(AffinityKey(R"({"prompt": {"nested": true}, "messages": "x"})", 64), "");
}

}  // namespace
}  // namespace shoal::router
