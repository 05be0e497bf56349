// Expert placement: every expert placed, loads conserved, and redundant copies of skewed
// routing bring the busiest member toward the mean.
#include "planner/expert_placement.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

namespace shoal::planner {
namespace {

double Total(const ExpertPlacement& p) {
  return std::accumulate(p.load.begin(), p.load.end(), 0.0);
}

TEST(ExpertPlacement, ContiguousRangesAsTheRuntime) {
  const std::vector<int64_t> load = {10, 10, 10, 10, 10, 10, 10, 10};
  auto p = PlaceContiguous(load, 4);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->experts[1], (std::vector<int32_t>{2, 3}));
  EXPECT_DOUBLE_EQ(p->busiest_over_mean, 1.0);
  EXPECT_FALSE(PlaceContiguous(load, 9).ok());  // more members than experts
  EXPECT_FALSE(PlaceContiguous({}, 1).ok());
}

TEST(ExpertPlacement, RedundantCopiesOfHotExpertsEvenTheLoad) {
  // Two hot experts next to each other: contiguous ranges put both on member 0.
  const std::vector<int64_t> load = {400, 300, 20, 20, 20, 20, 10, 10};
  auto contiguous = PlaceContiguous(load, 4);
  auto plain = PlaceBalanced(load, 4, 0);
  auto copies = PlaceBalanced(load, 4, 4);
  ASSERT_TRUE(contiguous.ok() && plain.ok() && copies.ok());
  EXPECT_NEAR(contiguous->busiest_over_mean, 700.0 / 200.0, 1e-9);
  EXPECT_LT(plain->busiest_over_mean, contiguous->busiest_over_mean);
  EXPECT_LT(copies->busiest_over_mean, plain->busiest_over_mean);
  for (const auto* p : {&*contiguous, &*plain, &*copies}) {
    EXPECT_NEAR(Total(*p), 800.0, 1e-9);  // every routed row runs somewhere, once
    std::set<int32_t> seen;
    for (const auto& held : p->experts) {
      EXPECT_EQ(std::set<int32_t>(held.begin(), held.end()).size(), held.size());  // no twins
      seen.insert(held.begin(), held.end());
    }
    EXPECT_EQ(seen.size(), load.size());  // every expert somewhere
  }
  EXPECT_FALSE(PlaceBalanced(load, 4, -1).ok());
  EXPECT_FALSE(PlaceBalanced(load, 4, 8 * 3 + 1).ok());
}

}  // namespace
}  // namespace shoal::planner
