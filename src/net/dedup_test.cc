// DedupFilter tests: once per (request, epoch, step), stale epochs dropped, bounded window.
#include "net/dedup.h"

#include <gtest/gtest.h>

namespace shoal::net {
namespace {

constexpr DedupVerdict kAccept = DedupVerdict::kAccept;
constexpr DedupVerdict kDuplicate = DedupVerdict::kDuplicate;
constexpr DedupVerdict kStale = DedupVerdict::kStaleEpoch;

TEST(DedupTest, AcceptsEachTagOnce) {
  DedupFilter f;
  EXPECT_EQ(f.Check({1, 0, 0}), kAccept);
  EXPECT_EQ(f.Check({1, 0, 0}), kDuplicate);
  EXPECT_EQ(f.Check({1, 0, 1}), kAccept);
  EXPECT_EQ(f.Check({2, 0, 0}), kAccept);  // other request, same step
  EXPECT_EQ(f.Check({2, 0, 0}), kDuplicate);
  EXPECT_EQ(f.Check({1, 0, 1}), kDuplicate);
  EXPECT_EQ(f.tracked_requests(), 2u);
}

TEST(DedupTest, OutOfOrderWithinTheWindow) {
  DedupFilter f;
  EXPECT_EQ(f.Check({7, 3, 10}), kAccept);
  EXPECT_EQ(f.Check({7, 3, 8}), kAccept);
  EXPECT_EQ(f.Check({7, 3, 9}), kAccept);
  EXPECT_EQ(f.Check({7, 3, 8}), kDuplicate);
  EXPECT_EQ(f.Check({7, 3, 12}), kAccept);
  EXPECT_EQ(f.Check({7, 3, 11}), kAccept);
  EXPECT_EQ(f.Check({7, 3, 10}), kDuplicate);
  EXPECT_EQ(f.Check({7, 3, 0}), kAccept);  // 12 - 0 < kWindow
  EXPECT_EQ(f.Check({7, 3, 200}), kAccept);
  // Just inside and just outside the window below the newest step (200).
  EXPECT_EQ(f.Check({7, 3, 200 - DedupFilter::kWindow + 1}), kAccept);
  EXPECT_EQ(f.Check({7, 3, 200 - DedupFilter::kWindow + 1}), kDuplicate);
  EXPECT_EQ(f.Check({7, 3, 200 - DedupFilter::kWindow}), DedupVerdict::kTooOld);
  EXPECT_EQ(f.Check({7, 3, 100}), DedupVerdict::kTooOld);
  EXPECT_EQ(f.Check({7, 3, 200}), kDuplicate);
  EXPECT_EQ(f.Check({7, 3, 199}), kAccept);
}

TEST(DedupTest, OlderEpochsDroppedNewerEpochResets) {
  DedupFilter f(5);
  EXPECT_EQ(f.Check({1, 4, 0}), kStale);
  EXPECT_EQ(f.Check({1, 5, 3}), kAccept);
  EXPECT_EQ(f.Check({1, 5, 3}), kDuplicate);
  // Failover: epoch 6 replays the request from step 0; the same steps are new again.
  EXPECT_EQ(f.Check({1, 6, 3}), kAccept);
  EXPECT_EQ(f.epoch(), 6u);
  EXPECT_EQ(f.Check({1, 6, 3}), kDuplicate);
  EXPECT_EQ(f.Check({1, 5, 4}), kStale);  // late frame of the old plan
  f.SetEpoch(3);                          // never goes back
  EXPECT_EQ(f.epoch(), 6u);
  f.SetEpoch(8);
  EXPECT_EQ(f.tracked_requests(), 0u);
  EXPECT_EQ(f.Check({1, 7, 100}), kStale);
  EXPECT_EQ(f.Check({1, 8, 100}), kAccept);
}

TEST(DedupTest, ForgetDropsAFinishedRequest) {
  DedupFilter f;
  EXPECT_EQ(f.Check({9, 0, 1}), kAccept);
  f.Forget(9);
  EXPECT_EQ(f.tracked_requests(), 0u);
  EXPECT_EQ(f.Check({9, 0, 1}), kAccept);
}

TEST(DedupTest, ExtremeValues) {
  DedupFilter f;
  const uint64_t max = ~uint64_t{0};
  EXPECT_EQ(f.Check({max, ~uint32_t{0}, max}), kAccept);
  EXPECT_EQ(f.Check({max, ~uint32_t{0}, max}), kDuplicate);
  EXPECT_EQ(f.Check({max, ~uint32_t{0}, 0}), DedupVerdict::kTooOld);
  EXPECT_STREQ(DedupVerdictName(kStale), "stale epoch");
}

}  // namespace
}  // namespace shoal::net
