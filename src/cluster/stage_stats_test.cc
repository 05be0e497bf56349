// Tests of StageStats (window arithmetic on a FakeClock) and the stage-time wire trailer.
#include "cluster/stage_stats.h"

#include <gtest/gtest.h>

#include <vector>

#include "cluster/wire.h"

namespace shoal::cluster {
namespace {

constexpr int64_t kS = 1'000'000;

TEST(StageStats, BusyFractionAndTokensOverTheWindow) {
  FakeClock clock(100 * kS);
  StageStats st(2, &clock);
  // 4 s in which stage 0 computes 1 s and stage 1 2 s, 40 rows.
  for (int i = 0; i < 4; ++i) {
    clock.Advance(kS);
    const uint32_t us[] = {250'000, 500'000};
    st.Record(us, 10);
  }
  auto l = st.Snapshot();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_NEAR(l[0].busy_fraction, 0.25, 1e-9);
  EXPECT_NEAR(l[1].busy_fraction, 0.5, 1e-9);
  EXPECT_NEAR(l[0].tokens_per_s, 10.0, 1e-9);
  EXPECT_NEAR(l[1].busy_s_total, 2.0, 1e-9);
  EXPECT_EQ(l[0].tokens_total, 40);
  // Idle for 20 s: the window forgets, the totals do not.
  clock.Advance(20 * kS);
  l = st.Snapshot();
  EXPECT_EQ(l[0].busy_fraction, 0.0);
  EXPECT_EQ(l[1].tokens_per_s, 0.0);
  EXPECT_NEAR(l[1].busy_s_total, 2.0, 1e-9);
  EXPECT_EQ(l[1].tokens_total, 40);
}

TEST(StageStats, WindowSlidesBySeconds) {
  FakeClock clock(0);
  StageStats st(1, &clock);
  // Fully busy for 30 s (one 1-s micro-batch per second), then half busy for 10 s.
  for (int i = 0; i < 30; ++i) {
    clock.Advance(kS);
    const uint32_t us[] = {1'000'000};
    st.Record(us, 1);
  }
  EXPECT_NEAR(st.Snapshot()[0].busy_fraction, 1.0, 1e-9);
  for (int i = 0; i < 10; ++i) {
    clock.Advance(kS);
    const uint32_t us[] = {500'000};
    st.Record(us, 1);
  }
  // The window is seconds 31..40 (the clock sits at exactly 40 s): only the half-busy ones,
  // 10 x 0.5 s over 9 s of wall time (results count in the second they arrive).
  EXPECT_NEAR(st.Snapshot()[0].busy_fraction, 5.0 / 9.0, 1e-9);
}

TEST(StageStats, ClampsAndToleratesShortOrLongTimeLists) {
  FakeClock clock(5 * kS);
  StageStats st(3, &clock);
  clock.Advance(kS / 2);
  const uint32_t big[] = {4'000'000, 1, 2, 3};  // more time than wall time, extra entry
  st.Record(big, 1);
  const uint32_t one[] = {7};  // missing stages count as 0
  st.Record(one, 1);
  auto l = st.Snapshot();
  EXPECT_EQ(l[0].busy_fraction, 1.0);
  EXPECT_NEAR(l[2].busy_s_total, 2e-6, 1e-12);
  EXPECT_EQ(l[0].tokens_total, 2);
}

TEST(StageTimes, RoundTripAndSplit) {
  std::vector<uint8_t> p = {1, 2, 3};
  const uint32_t t[] = {5, 0xFFFFFFFFu, 42};
  AppendStageTimes(t, &p);
  EXPECT_EQ(p.size(), 3u + 4 * 4);
  EXPECT_EQ(p[p.size() - 4], 3);  // little-endian count
  std::vector<uint32_t> got;
  auto body = SplitStageTimes(p, &got);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->size(), 3u);
  EXPECT_EQ(got, std::vector<uint32_t>({5, 0xFFFFFFFFu, 42}));
  std::vector<uint8_t> empty;
  AppendStageTimes({}, &empty);
  ASSERT_TRUE(SplitStageTimes(empty, &got).ok());
  EXPECT_TRUE(got.empty());
}

TEST(StageTimes, RejectsBadTrailers) {
  std::vector<uint32_t> got;
  const std::vector<uint8_t> short_payload = {1, 2};
  EXPECT_FALSE(SplitStageTimes(short_payload, &got).ok());
  const std::vector<uint8_t> count_too_big = {0, 0, 0, 0, 2, 0, 0, 0};  // 2 times, 1 present
  EXPECT_FALSE(SplitStageTimes(count_too_big, &got).ok());
  const std::vector<uint8_t> huge = {0xFF, 0xFF, 0xFF, 0xFF};
  EXPECT_FALSE(SplitStageTimes(huge, &got).ok());
}

}  // namespace
}  // namespace shoal::cluster
