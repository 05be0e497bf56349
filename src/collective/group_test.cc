// Collectives on real authenticated loopback links between in-process members: every result
// against one process's computation, bit for bit; a dead, silent or inconsistent member fails
// the call within the timeout.
#include "collective/group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "collective/mesh.h"
#include "net/auth.h"

namespace shoal::collective {
namespace {

net::ClusterKey Key() {
  const std::vector<uint8_t> k(32, 0x5a);
  return *net::ClusterKey::FromBytes(k);
}

// links[i][j]: member i's authenticated link to member j (full mesh over loopback).
Mesh MakeMesh(int m) {
  auto mesh = LoopbackMesh(m, Key());
  EXPECT_TRUE(mesh.ok()) << mesh.status().message();
  return mesh.ok() ? std::move(*mesh) : Mesh{};
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Runs fn(member) on one thread per member and returns each member's status.
template <typename F>
std::vector<Status> OnAll(std::vector<std::unique_ptr<Group>>& g, F fn) {
  std::vector<Status> st(g.size());
  std::vector<std::thread> t;
  for (size_t k = 0; k < g.size(); ++k) t.emplace_back([&, k] { st[k] = fn(*g[k], k); });
  for (auto& x : t) x.join();
  return st;
}

std::vector<std::unique_ptr<Group>> Groups(int m, int64_t timeout_ms = 5'000) {
  auto links = MakeMesh(m);
  std::vector<std::unique_ptr<Group>> g;
  for (int k = 0; k < m; ++k)
    g.push_back(std::make_unique<Group>(k, links[static_cast<size_t>(k)], timeout_ms));
  return g;
}

TEST(CollectiveTest, SlicesCoverEveryElementOnce) {
  for (int64_t n : {0, 1, 7, 1000, 1001})
    for (int m = 1; m <= 9; ++m) {
      int64_t next = 0;
      for (int k = 0; k < m; ++k) {
        const Slice s = SliceOf(n, m, k);
        EXPECT_EQ(s.first, next);
        EXPECT_GE(s.count, n / m);
        EXPECT_LE(s.count, n / m + 1);
        next += s.count;
      }
      EXPECT_EQ(next, n);
    }
}

TEST(CollectiveTest, AllGatherOfUnevenSlicesEqualsTheWholeVector) {
  for (int m = 1; m <= 5; ++m) {
    auto g = Groups(m);
    const std::vector<float> whole = Random(1001, 7);
    std::vector<int64_t> counts;
    for (int k = 0; k < m; ++k) counts.push_back(SliceOf(1001, m, k).count);
    std::vector<std::vector<float>> out(static_cast<size_t>(m));
    for (int round = 0; round < 3; ++round) {  // calls follow each other on the same links
      auto st = OnAll(g, [&](Group& gr, size_t k) {
        const Slice s = SliceOf(1001, m, static_cast<int>(k));
        return gr.AllGather({whole.data() + s.first, static_cast<size_t>(s.count)}, counts,
                            &out[k]);
      });
      for (int k = 0; k < m; ++k) {
        ASSERT_TRUE(st[static_cast<size_t>(k)].ok()) << st[static_cast<size_t>(k)].message();
        EXPECT_EQ(out[static_cast<size_t>(k)], whole) << "member " << k << " of " << m;
      }
    }
  }
}

TEST(CollectiveTest, AllReduceAddsInMemberOrderOnEveryMember) {
  for (int m = 1; m <= 5; ++m) {
    auto g = Groups(m);
    std::vector<std::vector<float>> x;
    for (int k = 0; k < m; ++k) x.push_back(Random(1003, 100 + static_cast<uint32_t>(k)));
    std::vector<float> want = x[0];  // one process: ((x0 + x1) + x2) + ...
    for (int k = 1; k < m; ++k)
      for (size_t i = 0; i < want.size(); ++i) want[i] += x[static_cast<size_t>(k)][i];
    auto st = OnAll(g, [&](Group& gr, size_t k) { return gr.AllReduceOrdered(x[k]); });
    for (int k = 0; k < m; ++k) {
      ASSERT_TRUE(st[static_cast<size_t>(k)].ok()) << st[static_cast<size_t>(k)].message();
      EXPECT_EQ(0, std::memcmp(x[static_cast<size_t>(k)].data(), want.data(),
                               want.size() * sizeof(float)))
          << "member " << k << " of " << m;
    }
  }
}

TEST(CollectiveTest, ADeadMemberFailsTheCallAtOnce) {
  auto g = Groups(3, 5'000);
  std::vector<float> out;
  const std::vector<int64_t> counts = {4, 4, 4};
  const std::vector<float> mine(4, 1.0f);
  g[2].reset();  // its links close: as a killed process's would
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Status> st(2);
  std::thread a([&] { st[0] = g[0]->AllGather(mine, counts, &out); });
  std::vector<float> out1;
  st[1] = g[1]->AllGather(mine, counts, &out1);
  a.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(st[0].ok());
  EXPECT_FALSE(st[1].ok());
  EXPECT_LT(s, 2.0);  // the closed links answer at once, well before the 5 s timeout
  EXPECT_TRUE(g[0]->failed());
  EXPECT_FALSE(g[0]->AllGather(mine, counts, &out).ok());  // a failed group stays failed
}

TEST(CollectiveTest, ASilentMemberFailsTheCallWithinTheTimeout) {
  auto g = Groups(3, 400);
  const std::vector<int64_t> counts = {2, 2, 2};
  const std::vector<float> mine(2, 1.0f);
  std::vector<float> out0, out1;
  const auto t0 = std::chrono::steady_clock::now();
  Status s0;
  std::thread a([&] { s0 = g[0]->AllGather(mine, counts, &out0); });
  const Status s1 = g[1]->AllGather(mine, counts, &out1);  // member 2 never calls
  a.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(s0.ok());
  EXPECT_FALSE(s1.ok());
  EXPECT_LT(s, 3.0);
}

TEST(CollectiveTest, AMemberWithOtherSizesIsRefused) {
  auto g = Groups(2);
  std::vector<float> out0, out1;
  const std::vector<float> a(3, 1.0f), b(5, 2.0f);
  Status s0, s1;
  std::thread t([&] { s0 = g[0]->AllGather(a, std::vector<int64_t>{3, 4}, &out0); });
  s1 = g[1]->AllGather(b, std::vector<int64_t>{3, 5}, &out1);  // says 5 where member 0 expects 4
  t.join();
  EXPECT_FALSE(s0.ok());
  EXPECT_NE(s0.message().find("expected"), std::string::npos) << s0.message();
  EXPECT_FALSE(g[0]->AllGather(a, std::vector<int64_t>{3}, &out0).ok());  // wrong count list
}

}  // namespace
}  // namespace shoal::collective
