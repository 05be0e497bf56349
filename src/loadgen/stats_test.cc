// Tests of the benchmark statistics: percentiles, TPOT and the report on known inputs.
#include "loadgen/stats.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace shoal::loadgen {
namespace {

TEST(Percentile, MatchesNumpyLinearInterpolation) {
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  // numpy.percentile([4, 1, 3, 2], q) for q = 0, 50, 99, 100.
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_NEAR(Percentile({4, 1, 3, 2}, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 100), 4);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_NEAR(Percentile(hundred, 99), 99.01, 1e-9);
  EXPECT_DOUBLE_EQ(Percentile(hundred, 50), 50.5);
}

TEST(Summarize, MillisecondsMeanMedianP99Std) {
  const Distribution d = Summarize({0.001, 0.002, 0.003, 0.010});
  EXPECT_NEAR(d.mean_ms, 4.0, 1e-9);
  EXPECT_NEAR(d.median_ms, 2.5, 1e-9);
  EXPECT_NEAR(d.p99_ms, 9.79, 1e-9);
  EXPECT_NEAR(d.std_ms, std::sqrt((9 + 4 + 1 + 36) / 4.0), 1e-9);  // population, as np.std
  const Distribution empty = Summarize({});
  EXPECT_EQ(empty.mean_ms, 0);
  EXPECT_EQ(empty.p99_ms, 0);
}

TEST(Tpot, IsLatencyAfterFirstTokenOverRemainingTokens) {
  RequestResult r;
  r.ok = true;
  r.ttft = 0.1;
  r.latency = 1.0;
  r.output_tokens = 10;
  r.content_chunks = 4;  // usage wins over the chunk count
  double tpot = 0;
  ASSERT_TRUE(Tpot(r, &tpot));
  EXPECT_DOUBLE_EQ(tpot, 0.9 / 9);
  EXPECT_EQ(OutputTokens(r), 10);
  r.output_tokens = -1;  // no usage: content chunks count
  EXPECT_EQ(OutputTokens(r), 4);
  ASSERT_TRUE(Tpot(r, &tpot));
  EXPECT_DOUBLE_EQ(tpot, 0.9 / 3);
  r.output_tokens = 1;  // one token has no TPOT
  EXPECT_FALSE(Tpot(r, &tpot));
}

RequestResult Ok(double ttft, double latency, int64_t prompt, int64_t out,
                 std::vector<double> itl) {
  RequestResult r;
  r.ok = true;
  r.ttft = ttft;
  r.latency = latency;
  r.prompt_tokens = prompt;
  r.output_tokens = out;
  r.content_chunks = out;
  r.itl = std::move(itl);
  return r;
}

RequestResult Failed(std::string error) {
  RequestResult r;
  r.error = std::move(error);
  return r;
}

TEST(MakeReport, AggregatesSuccessesAndCountsFailures) {
  std::vector<RequestResult> results = {
      Ok(0.1, 0.5, 10, 5, {0.1, 0.1, 0.1, 0.1}),
      Ok(0.2, 0.4, -1, 3, {0.1, 0.1}),  // no usage: the estimate (20) stands in
      Failed("HTTP 500: boom"),
      Failed("connect: refused"),
      Failed("HTTP 500: boom"),
  };
  for (int i = 0; i < 10; ++i) results.push_back(Failed("distinct " + std::to_string(i)));
  const BenchReport rep = MakeReport(results, {99, 20, 1, 1, 1}, 2.0);
  EXPECT_EQ(rep.completed, 2);
  EXPECT_EQ(rep.failed, 13);
  EXPECT_EQ(rep.total_input_tokens, 30);
  EXPECT_EQ(rep.total_output_tokens, 8);
  EXPECT_DOUBLE_EQ(rep.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(rep.output_throughput, 4.0);
  EXPECT_DOUBLE_EQ(rep.total_token_throughput, 19.0);
  EXPECT_NEAR(rep.ttft.mean_ms, 150, 1e-9);
  EXPECT_NEAR(rep.e2el.median_ms, 450, 1e-9);
  EXPECT_NEAR(rep.itl.mean_ms, 100, 1e-9);
  EXPECT_NEAR(rep.tpot.mean_ms, 100, 1e-9);  // (0.4 / 4 + 0.2 / 2) / 2
  ASSERT_EQ(rep.errors.size(), BenchReport::kMaxErrors);
  EXPECT_EQ(rep.errors[0], std::make_pair(std::string("HTTP 500: boom"), int64_t{2}));
  EXPECT_EQ(rep.errors[1].first, "connect: refused");

  const auto j = nlohmann::json::parse(ReportJson(rep));
  for (const char* key : {"completed",
                          "failed",
                          "duration",
                          "total_input_tokens",
                          "total_output_tokens",
                          "request_throughput",
                          "output_throughput",
                          "total_token_throughput",
                          "mean_ttft_ms",
                          "median_ttft_ms",
                          "p99_ttft_ms",
                          "mean_tpot_ms",
                          "median_tpot_ms",
                          "p99_tpot_ms",
                          "mean_itl_ms",
                          "median_itl_ms",
                          "p99_itl_ms",
                          "mean_e2el_ms",
                          "median_e2el_ms",
                          "p99_e2el_ms",
                          "errors"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["completed"], 2);
  EXPECT_EQ(j["errors"][0]["count"], 2);
  const std::string text = ReportText(rep);
  EXPECT_NE(text.find("Successful requests:"), std::string::npos);
  EXPECT_NE(text.find("P99 ITL (ms):"), std::string::npos);
  EXPECT_NE(text.find("error (2x): HTTP 500: boom"), std::string::npos);
}

TEST(MakeReport, NoRequestsNoDivisionByZero) {
  const BenchReport rep = MakeReport({}, {}, 0);
  EXPECT_EQ(rep.completed, 0);
  EXPECT_EQ(rep.request_throughput, 0);
}

}  // namespace
}  // namespace shoal::loadgen
