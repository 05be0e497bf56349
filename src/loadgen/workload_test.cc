// Tests of workloads (synthetic prompts, JSONL datasets, Poisson arrivals) and URL parsing.
#include "loadgen/workload.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "loadgen/url.h"

namespace shoal::loadgen {
namespace {

TEST(ArrivalOffsets, MeanGapMatchesRateForSeededRun) {
  constexpr int kN = 20000;
  constexpr double kRate = 50;
  const std::vector<double> t = ArrivalOffsets(kN, kRate, 42);
  ASSERT_EQ(t.size(), static_cast<size_t>(kN));
  EXPECT_EQ(t[0], 0);
  for (int i = 1; i < kN; ++i) ASSERT_GE(t[i], t[i - 1]);
  // Exponential gaps: mean 1/rate, standard deviation 1/rate; the mean of 19,999 gaps has a
  // relative standard error of 0.7%, so 3% is more than 4 sigma.
  const double mean_gap = t.back() / (kN - 1);
  EXPECT_NEAR(mean_gap, 1 / kRate, 0.03 / kRate);
  double var = 0;
  for (int i = 1; i < kN; ++i) var += std::pow(t[i] - t[i - 1] - mean_gap, 2);
  EXPECT_NEAR(std::sqrt(var / (kN - 2)), 1 / kRate, 0.05 / kRate);
  EXPECT_EQ(ArrivalOffsets(100, kRate, 42), ArrivalOffsets(100, kRate, 42));
  EXPECT_NE(ArrivalOffsets(100, kRate, 42), ArrivalOffsets(100, kRate, 43));
}

TEST(ArrivalOffsets, InfiniteRateSendsAllAtOnce) {
  const auto t = ArrivalOffsets(5, std::numeric_limits<double>::infinity(), 1);
  EXPECT_EQ(t, std::vector<double>(5, 0.0));
}

int Words(const std::string& s) {
  std::istringstream in(s);
  int n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

TEST(SyntheticRequests, WordCountsSeedAndDistinctPrompts) {
  const auto a = SyntheticRequests(20, 64, 16, 7);
  ASSERT_EQ(a.size(), 20u);
  for (const auto& r : a) {
    EXPECT_EQ(Words(r.prompt), 64);
    EXPECT_EQ(r.prompt_tokens, 64);
    EXPECT_EQ(r.output_len, 16);
  }
  EXPECT_NE(a[0].prompt, a[1].prompt);
  EXPECT_EQ(a[3].prompt, SyntheticRequests(20, 64, 16, 7)[3].prompt);
  EXPECT_NE(a[3].prompt, SyntheticRequests(20, 64, 16, 8)[3].prompt);
}

class DatasetTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("loadgen_dataset_" + std::to_string(::getpid()) + ".jsonl"))
                          .string();
};

TEST_F(DatasetTest, ReadsPromptsAndOutputLengthsCycling) {
  const std::string p = Write(
      "{\"prompt\": \"hello big world\", \"output_len\": 5}\n\n{\"prompt\": \"second one\"}\n");
  auto r = LoadDataset(p, 5, 32);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 5u);
  EXPECT_EQ((*r)[0].prompt, "hello big world");
  EXPECT_EQ((*r)[0].prompt_tokens, 3);
  EXPECT_EQ((*r)[0].output_len, 5);
  EXPECT_EQ((*r)[1].prompt, "second one");
  EXPECT_EQ((*r)[1].output_len, 32);
  EXPECT_EQ((*r)[4].prompt, "hello big world");
}

TEST_F(DatasetTest, BadLinesAndMissingFilesAreErrors) {
  auto r = LoadDataset(Write("{\"prompt\": \"ok\"}\nnot json\n"), 2, 8);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(":2:"), std::string::npos) << r.status().message();
  EXPECT_FALSE(LoadDataset(Write("{\"prompt\": 3}\n"), 1, 8).ok());
  EXPECT_FALSE(LoadDataset(Write("{\"prompt\": \"x\", \"output_len\": 0}\n"), 1, 8).ok());
  EXPECT_FALSE(LoadDataset(Write("\n"), 1, 8).ok());
  EXPECT_FALSE(LoadDataset("/nonexistent/loadgen.jsonl", 1, 8).ok());
}

TEST(ParseUrl, HostPortPathAndRejections) {
  auto u = ParseUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8000");
  EXPECT_EQ(u->path, "");
  u = ParseUrl("http://localhost/proxy/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->path, "/proxy");
  u = ParseUrl("http://[::1]:9000/x");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "9000");
  EXPECT_FALSE(ParseUrl("https://127.0.0.1").ok());
  EXPECT_FALSE(ParseUrl("127.0.0.1:80").ok());
  EXPECT_FALSE(ParseUrl("http://:80").ok());
  EXPECT_FALSE(ParseUrl("http://h:99999").ok());
  EXPECT_FALSE(ParseUrl("http://h:8x").ok());
}

}  // namespace
}  // namespace shoal::loadgen
