// ThreadPool tests: every index covered exactly once, chunks aligned to the grain.
#include "threading/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace shoal {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEachIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelFor(n, 4, [&](int64_t b, int64_t e) {
        EXPECT_EQ(b % 4, 0);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPoolTest, ParallelForDynamicCoversEachIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1000, 4099}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> calls{0};
      pool.ParallelForDynamic(n, 4, [&](int64_t b, int64_t e) {
        EXPECT_EQ(b % 4, 0);
        EXPECT_LT(b, e);
        calls++;
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
      // Many chunks per thread where there is enough work to cut.
      if (threads > 1 && n >= 1000) {
        EXPECT_GT(calls.load(), threads);
      }
    }
  }
}

TEST(ThreadPoolTest, RunCallsEveryThread) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 100; ++rep) {
    std::atomic<int> mask{0};
    pool.Run([&](int t, int n) {
      EXPECT_EQ(n, 4);
      mask.fetch_or(1 << t);
    });
    EXPECT_EQ(mask.load(), 15);
  }
}

}  // namespace
}  // namespace shoal
