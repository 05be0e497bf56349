// StopChecker tests: stop strings split across increments, partial holdback, EOS, max_tokens.
#include "sampling/stop_checker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shoal {
namespace {

constexpr int32_t kEos = 2;

SamplingParams WithStops(std::vector<std::string> stops) {
  SamplingParams p;
  p.stop = std::move(stops);
  return p;
}

TEST(StopStringTest, FindsTheEarliestMatch) {
  const std::vector<std::string> stops = {"world", "lo w", ""};
  const StopMatch m = FindStopString("hello world", stops);
  EXPECT_EQ(m.pos, 3u);
  EXPECT_EQ(m.index, 1);
  EXPECT_EQ(FindStopString("nothing here", stops).index, -1);
}

TEST(StopStringTest, PartialLengthIsTheLongestPrefixSuffix) {
  const std::vector<std::string> stops = {"Hello", "abcabd"};
  EXPECT_EQ(PartialStopLength("say He", stops), 2u);
  EXPECT_EQ(PartialStopLength("say Hel", stops), 3u);
  EXPECT_EQ(PartialStopLength("say Hex", stops), 0u);
  EXPECT_EQ(PartialStopLength("xabcab", stops), 5u);  // overlapping prefixes
  EXPECT_EQ(PartialStopLength("Hello", stops), 0u);   // a full match is not "partial"
  EXPECT_EQ(PartialStopLength("", stops), 0u);
}

TEST(StopCheckerTest, StopStringSplitAcrossIncrements) {
  StopChecker sc(WithStops({"Hello"}), {kEos});
  StopUpdate u = sc.Add(10, "He");
  EXPECT_EQ(u.emit, "");
  EXPECT_EQ(u.reason, StopReason::kNone);
  EXPECT_EQ(sc.held(), "He");
  u = sc.Add(11, "llo");
  EXPECT_EQ(u.emit, "");
  EXPECT_EQ(u.reason, StopReason::kStopString);
  EXPECT_EQ(u.stop_index, 0);
  EXPECT_TRUE(sc.stopped());
  EXPECT_EQ(StopReasonName(sc.reason()), "stop");
}

TEST(StopCheckerTest, EmitsTextBeforeTheStopAndWithholdsTheRest) {
  StopChecker sc(WithStops({"###", "Hello"}), {kEos});
  StopUpdate u = sc.Add(10, "Say He");
  EXPECT_EQ(u.emit, "Say ");
  u = sc.Add(11, "llo world");
  EXPECT_EQ(u.emit, "");
  EXPECT_EQ(u.stop_index, 1);
  u = sc.Add(12, "more");  // after the stop nothing more comes out
  EXPECT_EQ(u.emit, "");
  EXPECT_EQ(u.reason, StopReason::kStopString);

  StopChecker sc2(WithStops({"###"}), {kEos});
  u = sc2.Add(10, "abc ### def");
  EXPECT_EQ(u.emit, "abc ");
  EXPECT_EQ(u.reason, StopReason::kStopString);
}

TEST(StopCheckerTest, PartialHoldbackReleasedWhenItStopsMatching) {
  StopChecker sc(WithStops({"Hello"}), {kEos});
  EXPECT_EQ(sc.Add(10, "oh H").emit, "oh ");
  EXPECT_EQ(sc.Add(11, "el").emit, "");
  EXPECT_EQ(sc.held(), "Hel");
  StopUpdate u = sc.Add(12, "p!");
  EXPECT_EQ(u.emit, "Help!");
  EXPECT_EQ(u.reason, StopReason::kNone);
  // A held prefix that restarts a match: "HeHe" holds only the second "He".
  EXPECT_EQ(sc.Add(13, "HeHe").emit, "He");
  EXPECT_EQ(sc.held(), "He");
  EXPECT_EQ(sc.Flush(), "He");
  EXPECT_EQ(sc.held(), "");
}

TEST(StopCheckerTest, Utf8StopStrings) {
  StopChecker sc(WithStops({"终止"}), {kEos});
  EXPECT_EQ(sc.Add(10, "好的\xe7\xbb").emit, "好的");  // "终" arrives in two pieces
  EXPECT_EQ(sc.Add(11, "\x88").emit, "");
  const StopUpdate u = sc.Add(12, "止吧");
  EXPECT_EQ(u.reason, StopReason::kStopString);
  EXPECT_EQ(u.emit, "");
}

TEST(StopCheckerTest, EosFlushesHeldTextAndIsNotEmitted) {
  StopChecker sc(WithStops({"Hello"}), {kEos, 7});
  EXPECT_EQ(sc.Add(10, "Hel").emit, "");
  const StopUpdate u = sc.Add(7, "<|im_end|>");
  EXPECT_EQ(u.reason, StopReason::kEos);
  EXPECT_EQ(u.emit, "Hel");
  EXPECT_EQ(sc.n_tokens(), 2);
}

TEST(StopCheckerTest, IgnoreEosKeepsGoing) {
  SamplingParams p;
  p.ignore_eos = true;
  StopChecker sc(p, {kEos});
  const StopUpdate u = sc.Add(kEos, "");
  EXPECT_EQ(u.reason, StopReason::kNone);
  EXPECT_FALSE(sc.stopped());
}

TEST(StopCheckerTest, MaxTokens) {
  SamplingParams p = WithStops({"Hello"});
  p.max_tokens = 3;
  StopChecker sc(p, {kEos});
  EXPECT_EQ(sc.Add(10, "a").reason, StopReason::kNone);
  EXPECT_EQ(sc.Add(11, "b").reason, StopReason::kNone);
  const StopUpdate u = sc.Add(12, " He");  // the held "He" can no longer become "Hello"
  EXPECT_EQ(u.reason, StopReason::kMaxTokens);
  EXPECT_EQ(u.emit, " He");
  EXPECT_EQ(StopReasonName(u.reason), "length");

  p.max_tokens = 0;  // nothing may be generated
  EXPECT_TRUE(StopChecker(p, {kEos}).stopped());
  p.max_tokens = -1;  // unlimited
  StopChecker unlimited(p, {kEos});
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(unlimited.Add(10, "x").reason, StopReason::kNone);
}

TEST(StopCheckerTest, StopStringBeatsMaxTokensOnTheSameToken) {
  SamplingParams p = WithStops({"end"});
  p.max_tokens = 1;
  StopChecker sc(p, {kEos});
  const StopUpdate u = sc.Add(10, "the end");
  EXPECT_EQ(u.reason, StopReason::kStopString);
  EXPECT_EQ(u.emit, "the ");
}

}  // namespace
}  // namespace shoal
