// Logits processor tests: each processor on small hand-made logits, FillTopK against FillAll.
#include "sampling/logits_processors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace shoal {
namespace {

using ::testing::ElementsAre;

CandidateSet MakeSet(const std::vector<float>& logits) {
  CandidateSet set;
  for (size_t i = 0; i < logits.size(); ++i) {
    set.items.push_back({static_cast<int32_t>(i), logits[i], 0.0f});
  }
  return set;
}

// Logits whose softmax is exactly `probs` (up to float rounding).
CandidateSet FromProbs(const std::vector<float>& probs) {
  std::vector<float> logits;
  for (float p : probs) logits.push_back(std::log(p));
  return MakeSet(logits);
}

std::vector<int32_t> Ids(const CandidateSet& set) {
  std::vector<int32_t> ids;
  for (const TokenCandidate& c : set.items) ids.push_back(c.id);
  return ids;
}

std::vector<int32_t> SortedIds(const CandidateSet& set) {
  std::vector<int32_t> ids = Ids(set);
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(PenaltyTest, CountsTheWindowIgnoringBadIds) {
  std::vector<TokenCount> counts;
  const std::vector<int32_t> history = {7, 5, 3, 5, 9, 5, 100, -1};
  CountPenaltyWindow(history, -1, 10, &counts);
  ASSERT_EQ(counts.size(), 4u);
  EXPECT_EQ(counts[0].id, 3);
  EXPECT_EQ(counts[1].id, 5);
  EXPECT_EQ(counts[1].count, 3);
  EXPECT_EQ(counts[2].id, 7);
  EXPECT_EQ(counts[3].id, 9);
  CountPenaltyWindow(history, 4, 10, &counts);  // {9, 5, 100, -1}
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].id, 5);
  EXPECT_EQ(counts[0].count, 1);
  EXPECT_EQ(counts[1].id, 9);
  CountPenaltyWindow(history, 0, 10, &counts);
  EXPECT_TRUE(counts.empty());
}

TEST(PenaltyTest, RepetitionDividesPositiveMultipliesNegative) {
  SamplingParams p;
  p.repeat_penalty = 2.0f;
  EXPECT_FLOAT_EQ(PenalizeLogit(3.0f, 1, p), 1.5f);
  EXPECT_FLOAT_EQ(PenalizeLogit(-3.0f, 1, p), -6.0f);
  EXPECT_FLOAT_EQ(PenalizeLogit(0.0f, 4, p), 0.0f);
  p.repeat_penalty = 1.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 1.0f;
  EXPECT_FLOAT_EQ(PenalizeLogit(3.0f, 3, p), 3.0f - 1.5f - 1.0f);
  p.presence_penalty = -1.0f;  // negative values encourage repeats (OpenAI allows [-2, 2])
  EXPECT_FLOAT_EQ(PenalizeLogit(3.0f, 1, p), 3.0f - 0.5f + 1.0f);
}

TEST(PenaltyTest, FillAllAppliesPenaltiesById) {
  SamplingParams p;
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.1f;
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, -1.0f};
  std::vector<TokenCount> counts;
  CountPenaltyWindow(std::vector<int32_t>{2, 3, 3}, -1, 4, &counts);
  CandidateSet set;
  FillAll(logits.data(), 4, counts, p, &set);
  ASSERT_EQ(set.items.size(), 4u);
  EXPECT_FLOAT_EQ(set.items[0].logit, 1.0f);
  EXPECT_FLOAT_EQ(set.items[1].logit, 2.0f);
  EXPECT_FLOAT_EQ(set.items[2].logit, 1.5f - 0.1f);
  EXPECT_FLOAT_EQ(set.items[3].logit, -2.0f - 0.2f);
}

// FillTopK's one-pass selection must equal "penalize everything, sort, cut" including when
// penalties raise tokens from far down the ranking.
TEST(FillTopKTest, MatchesFullSortWithPenalties) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int trial = 0; trial < 50; ++trial) {
    const int32_t n_vocab = 1 + static_cast<int32_t>(rng() % 500);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    for (float& l : logits) l = std::round(normal(rng) * 4.0f) / 4.0f;  // many exact ties
    std::vector<int32_t> history(rng() % 80);
    for (int32_t& t : history) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
    SamplingParams p;
    p.repeat_penalty = (trial % 3 == 0) ? 0.5f : 1.3f;
    p.presence_penalty = (trial % 2 == 0) ? -3.0f : 0.5f;
    p.frequency_penalty = 0.25f;
    std::vector<TokenCount> counts;
    CountPenaltyWindow(history, 64, n_vocab, &counts);
    for (int k : {1, 2, 7, 40}) {
      CandidateSet fast, ref;
      FillTopK(logits.data(), n_vocab, counts, p, k, &fast);
      FillAll(logits.data(), n_vocab, counts, p, &ref);
      KeepTopK(&ref, k);
      SortCandidates(&ref);
      ASSERT_EQ(Ids(fast), Ids(ref)) << "trial " << trial << " k " << k;
      EXPECT_TRUE(fast.sorted);
    }
  }
}

TEST(TopKTest, KeepsTheBestLowestIdOnTies) {
  CandidateSet set = MakeSet({1.0f, 3.0f, 2.0f, 3.0f, 0.0f});
  KeepTopK(&set, 2);
  EXPECT_THAT(Ids(set), ElementsAre(1, 3));
  set = MakeSet({3.0f, 1.0f, 1.0f, 1.0f});
  KeepTopK(&set, 2);
  EXPECT_THAT(Ids(set), ElementsAre(0, 1));
  set = MakeSet({1.0f, 2.0f});
  KeepTopK(&set, 0);  // disabled
  EXPECT_THAT(Ids(set), ElementsAre(0, 1));
  KeepTopK(&set, 5);  // larger than the set
  EXPECT_THAT(Ids(set), ElementsAre(0, 1));
}

TEST(TopPTest, KeepsTheSmallestPrefixReachingP) {
  const std::vector<float> probs = {0.1f, 0.5f, 0.15f, 0.25f};  // sorted: ids 1, 3, 2, 0
  CandidateSet set = FromProbs(probs);
  KeepTopP(&set, 0.7f);  // 0.5 + 0.25 = 0.75 >= 0.7
  EXPECT_THAT(Ids(set), ElementsAre(1, 3));
  set = FromProbs(probs);
  KeepTopP(&set, 0.8f);  // 0.9 >= 0.8
  EXPECT_THAT(Ids(set), ElementsAre(1, 3, 2));
  set = FromProbs(probs);
  KeepTopP(&set, 0.4f);
  EXPECT_THAT(Ids(set), ElementsAre(1));
  set = FromProbs(probs);
  KeepTopP(&set, 0.0f);  // degenerate: the single best token
  EXPECT_THAT(Ids(set), ElementsAre(1));
  set = FromProbs(probs);
  KeepTopP(&set, 1.0f);  // disabled
  EXPECT_THAT(SortedIds(set), ElementsAre(0, 1, 2, 3));
}

TEST(TopPTest, LargeUnsortedSetNeedingSeveralRounds) {
  // 1000 equally likely tokens: the nucleus of 0.5005 is 501 tokens, the lowest ids on ties.
  CandidateSet set = MakeSet(std::vector<float>(1000, 0.25f));
  KeepTopP(&set, 0.5005f);
  ASSERT_EQ(set.items.size(), 501u);
  const std::vector<int32_t> ids = SortedIds(set);
  for (int32_t i = 0; i < 501; ++i) EXPECT_EQ(ids[static_cast<size_t>(i)], i);
}

// The bucketed path (unsorted input) keeps exactly the set of the plain sorted scan.
TEST(TopPTest, BucketedPathMatchesSortedScan) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t n = 1 + rng() % 5000;
    const float scale = 0.1f + static_cast<float>(trial % 8);  // flat to peaky
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> logits(n);
    for (float& l : logits) l = std::round(normal(rng) * 64.0f) / 64.0f;  // with ties
    for (float p : {0.05f, 0.5f, 0.9f, 0.95f, 0.999f}) {
      CandidateSet bucketed = MakeSet(logits), sorted = MakeSet(logits);
      SortCandidates(&sorted);
      KeepTopP(&bucketed, p);
      KeepTopP(&sorted, p);
      ASSERT_EQ(SortedIds(bucketed), SortedIds(sorted)) << "trial " << trial << " p " << p;
    }
  }
}

TEST(MinPTest, KeepsTokensAboveAFractionOfTheBest) {
  const std::vector<float> probs = {0.1f, 0.5f, 0.15f, 0.25f};
  CandidateSet set = FromProbs(probs);
  KeepMinP(&set, 0.4f);                      // p >= 0.2
  EXPECT_THAT(Ids(set), ElementsAre(1, 3));  // item order kept
  set = FromProbs(probs);
  KeepMinP(&set, 0.25f);  // p >= 0.125
  EXPECT_THAT(Ids(set), ElementsAre(1, 2, 3));
  set = FromProbs(probs);
  KeepMinP(&set, 0.0f);
  EXPECT_EQ(set.items.size(), 4u);
  set = FromProbs(probs);
  KeepMinP(&set, 1.0f);
  EXPECT_THAT(Ids(set), ElementsAre(1));
}

TEST(TemperatureTest, ScalesLogitsBeforeSoftmax) {
  CandidateSet set = MakeSet({0.0f, std::log(2.0f)});
  Softmax(&set);
  EXPECT_NEAR(set.items[0].p, 1.0 / 3.0, 1e-6);
  EXPECT_NEAR(set.items[1].p, 2.0 / 3.0, 1e-6);
  ApplyTemperature(&set, 0.5f);  // logits double: probabilities 1:4
  Softmax(&set);
  EXPECT_NEAR(set.items[0].p, 0.2, 1e-6);
  EXPECT_NEAR(set.items[1].p, 0.8, 1e-6);
  ApplyTemperature(&set, 4.0f);  // logits halve from the original: 1:sqrt(2)
  Softmax(&set);
  EXPECT_NEAR(set.items[1].p / set.items[0].p, std::sqrt(2.0), 1e-5);
}

TEST(SoftmaxTest, HandlesInfinities) {
  const float inf = std::numeric_limits<float>::infinity();
  CandidateSet set = MakeSet({-inf, 1.0f, 1.0f});
  Softmax(&set);
  EXPECT_EQ(set.items[0].p, 0.0f);
  EXPECT_FLOAT_EQ(set.items[1].p, 0.5f);
  set = MakeSet({-inf, -inf});
  Softmax(&set);  // nothing is possible: uniform rather than NaN
  EXPECT_FLOAT_EQ(set.items[0].p, 0.5f);
}

}  // namespace
}  // namespace shoal
