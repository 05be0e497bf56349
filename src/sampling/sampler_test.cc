// Sampler tests: greedy ties, the processor chain, seeded determinism, empirical distribution.
#include "sampling/sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace shoal {
namespace {

using ::testing::ElementsAre;

SamplingParams PureSoftmax(uint64_t seed) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

std::vector<int32_t> Generate(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int32_t> history = {1, 2, 3};  // a "prompt"
  for (int i = 0; i < n; ++i) history.push_back(s.Sample(logits.data(), history));
  return {history.begin() + 3, history.end()};
}

TEST(SamplerTest, GreedyTakesTheLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float t : {0.0f, -1.0f}) {
    p.temperature = t;
    Sampler s(p, 5);
    const std::vector<float> a = {1.0f, 5.0f, 2.0f, 5.0f, 5.0f};
    EXPECT_EQ(s.Sample(a.data(), {}), 1);
    const std::vector<float> b = {nan, -1.0f, nan, -1.0f, -2.0f};
    EXPECT_EQ(s.Sample(b.data(), {}), 1);
    const std::vector<float> c = {7.0f, 7.0f, 7.0f, 7.0f, 7.0f};
    EXPECT_EQ(s.Sample(c.data(), {}), 0);
    auto cand = s.Candidates(a.data(), {});
    ASSERT_EQ(cand.size(), 1u);
    EXPECT_EQ(cand[0].id, 1);
    EXPECT_EQ(cand[0].p, 1.0f);
  }
}

TEST(SamplerTest, GreedyWithRepeatPenalty) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  Sampler s(p, 3);
  const std::vector<float> logits = {1.0f, 5.0f, 4.0f};
  EXPECT_EQ(s.Sample(logits.data(), std::vector<int32_t>{0}), 1);
  EXPECT_EQ(s.Sample(logits.data(), std::vector<int32_t>{1}), 2);  // 5 / 2 < 4
  p.repeat_last_n = 1;                                             // only the last token counts
  s.Reset(p);
  EXPECT_EQ(s.Sample(logits.data(), std::vector<int32_t>{1, 0}), 1);
}

TEST(SamplerTest, ChainOrderTopKThenTopPThenMinPThenTemperature) {
  // Probabilities 0.4, 0.2, 0.15, 0.1, 0.08, 0.07 (ids shuffled).
  const std::vector<float> probs = {0.08f, 0.4f, 0.1f, 0.2f, 0.07f, 0.15f};
  std::vector<float> logits;
  for (float q : probs) logits.push_back(std::log(q));
  SamplingParams p;
  p.top_k = 4;           // ids 1 3 5 2 (0.4 0.2 0.15 0.1), renormalized over 0.85
  p.top_p = 0.75f;       // 0.4/0.85 = 0.47, +0.2/0.85 = 0.71, +0.15/0.85 = 0.88 -> ids 1 3 5
  p.min_p = 0.4f;        // p >= 0.4 * 0.4 = 0.16 -> ids 1 3
  p.temperature = 0.5f;  // 0.4^2 : 0.2^2 = 4 : 1
  Sampler s(p, 6);
  auto cand = s.Candidates(logits.data(), {});
  ASSERT_EQ(cand.size(), 2u);
  EXPECT_EQ(cand[0].id, 1);
  EXPECT_EQ(cand[1].id, 3);
  EXPECT_NEAR(cand[0].p, 0.8, 1e-5);
  EXPECT_NEAR(cand[1].p, 0.2, 1e-5);

  p.top_k = 0;  // no top-k: top-p over all six, 0.4 + 0.2 + 0.15 = 0.75 >= 0.74 -> ids 1 3 5
  p.top_p = 0.74f;
  p.min_p = 0.0f;
  p.temperature = 1.0f;
  s.Reset(p);
  cand = s.Candidates(logits.data(), {});
  ASSERT_EQ(cand.size(), 3u);
  EXPECT_EQ(cand[2].id, 5);
  EXPECT_NEAR(cand[0].p, 0.4 / 0.75, 1e-5);
  EXPECT_NEAR(cand[2].p, 0.15 / 0.75, 1e-5);
}

TEST(SamplerTest, SampledTokensComeFromTheCandidates) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(5000);
  for (float& l : logits) l = normal(rng);
  SamplingParams p;  // llama.cpp defaults
  p.seed = 99;
  p.repeat_penalty = 1.1f;
  Sampler s(p, 5000);
  std::vector<int32_t> history = {4, 8, 15};
  for (int i = 0; i < 100; ++i) {
    auto cand = s.Candidates(logits.data(), history);
    std::vector<int32_t> ids;
    for (const auto& c : cand) ids.push_back(c.id);
    const int32_t t = s.Sample(logits.data(), history);
    EXPECT_NE(std::find(ids.begin(), ids.end(), t), ids.end());
    EXPECT_LE(ids.size(), 40u);
    history.push_back(t);
  }
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferent) {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 0.05f * static_cast<float>(i % 13);
  Sampler a(PureSoftmax(1234), 64), b(PureSoftmax(1234), 64), c(PureSoftmax(1235), 64);
  const auto ta = Generate(a, logits, 50);
  EXPECT_EQ(ta, Generate(b, logits, 50));
  EXPECT_NE(ta, Generate(c, logits, 50));
  // Determinism does not depend on call history: a fresh sampler asked for position 40 alone
  // (a replay after failover) gives the same token.
  std::vector<int32_t> history = {1, 2, 3};
  history.insert(history.end(), ta.begin(), ta.begin() + 37);
  Sampler fresh(PureSoftmax(1234), 64);
  EXPECT_EQ(fresh.Sample(logits.data(), history), ta[37]);
}

TEST(SamplerTest, UniformStreamIsInRangeAndSeedDependent) {
  double sum = 0.0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = SampleUniform(5, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
  EXPECT_NE(SampleUniform(5, 0), SampleUniform(6, 0));
  EXPECT_NE(SampleUniform(5, 0), SampleUniform(5, 1));
}

// Pearson's chi-square of `counts` against `expected` probabilities.
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& expected, int n) {
  double chi2 = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

TEST(SamplerTest, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {0.0f, 1.0f, -0.5f, 2.0f, 0.3f, -1.0f, 1.5f, 0.7f};
  std::vector<double> expected(logits.size());
  double z = 0.0;
  for (float l : logits) z += std::exp(l);
  for (size_t i = 0; i < logits.size(); ++i) expected[i] = std::exp(logits[i]) / z;
  constexpr int kDraws = 20000;
  std::vector<int32_t> history(kDraws);  // contents unused (no penalties); length = position
  Sampler s(PureSoftmax(2024), 8);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    counts[static_cast<size_t>(s.Sample(logits.data(), std::span(history).first(i)))]++;
  }
  // 7 degrees of freedom: P(chi2 > 24.32) = 0.001. The seed is fixed, so this never flakes.
  EXPECT_LT(ChiSquare(counts, expected, kDraws), 24.32);

  // With temperature 0.7 and top-k 3: softmax(logits / 0.7) over ids 3, 6, 1.
  SamplingParams p = PureSoftmax(77);
  p.temperature = 0.7f;
  p.top_k = 3;
  Sampler t(p, 8);
  const std::vector<int32_t> ids = {3, 6, 1};
  std::vector<double> exp3;
  z = 0.0;
  for (int32_t id : ids) z += std::exp(logits[static_cast<size_t>(id)] / 0.7);
  for (int32_t id : ids) exp3.push_back(std::exp(logits[static_cast<size_t>(id)] / 0.7) / z);
  std::vector<int> c3(3, 0);
  for (int i = 0; i < kDraws; ++i) {
    const int32_t tok = t.Sample(logits.data(), std::span(history).first(i));
    const auto it = std::find(ids.begin(), ids.end(), tok);
    ASSERT_NE(it, ids.end()) << tok;
    c3[static_cast<size_t>(it - ids.begin())]++;
  }
  // 2 degrees of freedom: P(chi2 > 13.82) = 0.001.
  EXPECT_LT(ChiSquare(c3, exp3, kDraws), 13.82);
}

TEST(SamplingParamsTest, ValidateRejectsBadValues) {
  EXPECT_TRUE(SamplingParams{}.Validate().ok());
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("top_p"));
  p = {};
  p.min_p = -0.1f;
  EXPECT_FALSE(p.Validate().ok());
  p = {};
  p.repeat_penalty = 0.0f;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("repeat_penalty"));
  p = {};
  p.temperature = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(p.Validate().ok());
  p = {};
  p.frequency_penalty = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(p.Validate().ok());
}

}  // namespace
}  // namespace shoal
