// Tests of SSE parsing, HTTP response decoding (chunked, split anywhere) and stream events.
#include "loadgen/sse.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "loadgen/openai_stream.h"
#include "loadgen/response_decoder.h"

namespace shoal::loadgen {
namespace {

using Events = std::vector<std::string>;

const char kStream[] =
    ": keep-alive comment\n\n"
    "data: {\"a\":1}\n\n"
    "event: message\r\nid: 7\r\ndata: {\"b\":2}\r\n\r\n"
    "data:line one\ndata: line two\n\n"
    "retry: 5\n\n"
    "data: [DONE]\n\n";
const Events kExpected = {"{\"a\":1}", "{\"b\":2}", "line one\nline two", "[DONE]"};

TEST(SseParser, WholeStream) {
  SseParser p;
  Events ev;
  ASSERT_TRUE(p.Feed(kStream, &ev).ok());
  EXPECT_EQ(ev, kExpected);
  EXPECT_FALSE(p.has_partial());
}

TEST(SseParser, SplitAtEveryByteBoundaryAndByteByByte) {
  const std::string s = kStream;
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    SseParser p;
    Events ev;
    ASSERT_TRUE(p.Feed(std::string_view(s).substr(0, cut), &ev).ok());
    ASSERT_TRUE(p.Feed(std::string_view(s).substr(cut), &ev).ok());
    EXPECT_EQ(ev, kExpected) << "cut at " << cut;
  }
  SseParser p;
  Events ev;
  for (char c : s) ASSERT_TRUE(p.Feed(std::string_view(&c, 1), &ev).ok());
  EXPECT_EQ(ev, kExpected);
}

TEST(SseParser, PartialEventIsReported) {
  SseParser p;
  Events ev;
  ASSERT_TRUE(p.Feed("data: {\"a\"", &ev).ok());
  EXPECT_TRUE(ev.empty());
  EXPECT_TRUE(p.has_partial());
}

// An HTTP response whose chunked body cuts SSE events at odd places (mid-line, mid-"\n\n").
std::string ChunkedResponse() {
  const std::string body = "data: {\"x\":1}\n\ndata: {\"y\":2}\n\ndata: [DONE]\n\n";
  std::string r =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0, len = 5; at < body.size(); at += len, len += 4) {
    const std::string piece = body.substr(at, len);
    r += fmt::format("{:x};ext=1\r\n{}\r\n", piece.size(), piece);
  }
  return r + "0\r\n\r\n";
}
const Events kChunkedEvents = {"{\"x\":1}", "{\"y\":2}", "[DONE]"};

TEST(ResponseDecoder, ChunkedSplitAtEveryByteBoundary) {
  const std::string raw = ChunkedResponse();
  for (size_t cut = 0; cut <= raw.size(); ++cut) {
    ResponseDecoder d;
    Events ev;
    ASSERT_TRUE(d.Feed(std::string_view(raw).substr(0, cut), &ev).ok()) << cut;
    ASSERT_TRUE(d.Feed(std::string_view(raw).substr(cut), &ev).ok()) << cut;
    EXPECT_TRUE(d.done());
    EXPECT_EQ(d.status(), 200);
    EXPECT_EQ(ev, kChunkedEvents) << "cut at " << cut;
  }
  ResponseDecoder d;
  Events ev;
  for (char c : raw) ASSERT_TRUE(d.Feed(std::string_view(&c, 1), &ev).ok());
  EXPECT_TRUE(d.done());
  EXPECT_EQ(ev, kChunkedEvents);
}

TEST(ResponseDecoder, ContentLengthAndCloseDelimitedBodies) {
  const std::string body = "data: {\"x\":1}\n\n";
  ResponseDecoder a;
  Events ev;
  ASSERT_TRUE(
      a.Feed(fmt::format("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{}", body.size(), body), &ev)
          .ok());
  EXPECT_TRUE(a.done());
  EXPECT_EQ(ev, Events{"{\"x\":1}"});

  ResponseDecoder b;  // no length, no chunking: the body ends when the server closes
  ev.clear();
  ASSERT_TRUE(b.Feed("HTTP/1.1 200 OK\r\n\r\n" + body, &ev).ok());
  EXPECT_FALSE(b.done());
  ASSERT_TRUE(b.FeedEof(&ev).ok());
  EXPECT_EQ(ev, Events{"{\"x\":1}"});
}

TEST(ResponseDecoder, ErrorStatusKeepsBody) {
  ResponseDecoder d;
  Events ev;
  const std::string body = R"({"error":{"message":"boom"}})";
  ASSERT_TRUE(
      d.Feed(fmt::format("HTTP/1.1 500 Internal Server Error\r\nContent-Length: {}\r\n\r\n{}",
                         body.size(), body),
             &ev)
          .ok());
  EXPECT_TRUE(d.done());
  EXPECT_EQ(d.status(), 500);
  EXPECT_EQ(d.error_body(), body);
  EXPECT_TRUE(ev.empty());
}

TEST(ResponseDecoder, MalformedAndTruncatedResponsesFail) {
  ResponseDecoder bad;
  Events ev;
  EXPECT_FALSE(bad.Feed("SMTP ready\r\n\r\n", &ev).ok());

  ResponseDecoder bad_chunk;
  EXPECT_FALSE(
      bad_chunk.Feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", &ev).ok());

  ResponseDecoder no_header;
  ASSERT_TRUE(no_header.Feed("HTTP/1.1 200 OK\r\nContent-Le", &ev).ok());
  EXPECT_FALSE(no_header.FeedEof(&ev).ok());

  ResponseDecoder cut_chunk;  // closed inside a chunk
  ASSERT_TRUE(
      cut_chunk.Feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20\r\ndata: {", &ev)
          .ok());
  EXPECT_FALSE(cut_chunk.FeedEof(&ev).ok());

  ResponseDecoder cut_event;  // close-delimited body closed inside an event
  ASSERT_TRUE(cut_event.Feed("HTTP/1.1 200 OK\r\n\r\ndata: {\"x\"", &ev).ok());
  EXPECT_FALSE(cut_event.FeedEof(&ev).ok());
}

TEST(ParseStreamEvent, ContentUsageDoneAndErrors) {
  EXPECT_EQ(ParseStreamEvent("[DONE]").kind, StreamEvent::kDone);
  EXPECT_EQ(ParseStreamEvent(R"({"choices":[{"index":0,"text":" the"}]})").kind,
            StreamEvent::kContent);
  EXPECT_EQ(ParseStreamEvent(R"({"choices":[{"text":""}]})").kind, StreamEvent::kOther);
  EXPECT_EQ(ParseStreamEvent(R"({"choices":[{"delta":{"content":"Hi"}}]})").kind,
            StreamEvent::kContent);
  EXPECT_EQ(ParseStreamEvent(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})").kind,
            StreamEvent::kOther);
  EXPECT_EQ(ParseStreamEvent(R"({"choices":[{"delta":{"reasoning_content":"hm"}}]})").kind,
            StreamEvent::kContent);
  const StreamEvent u =
      ParseStreamEvent(R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}})");
  EXPECT_EQ(u.kind, StreamEvent::kOther);
  EXPECT_TRUE(u.has_usage);
  EXPECT_EQ(u.prompt_tokens, 12);
  EXPECT_EQ(u.completion_tokens, 34);
  EXPECT_FALSE(ParseStreamEvent(R"({"choices":[{"text":"a"}],"usage":null})").has_usage);
  const StreamEvent e = ParseStreamEvent(R"({"error":{"message":"out of memory"}})");
  EXPECT_EQ(e.kind, StreamEvent::kError);
  EXPECT_NE(e.error.find("out of memory"), std::string::npos);
  EXPECT_EQ(ParseStreamEvent("not json").kind, StreamEvent::kError);
  EXPECT_EQ(ParseStreamEvent("[1,2]").kind, StreamEvent::kError);
  EXPECT_EQ(ParseStreamEvent(R"({"usage":{"prompt_tokens":"many"}})").kind, StreamEvent::kError);
}

TEST(RequestBody, StreamingGreedyWithUsageAndIgnoreEos) {
  EXPECT_EQ(ApiKindOf("/v1/completions"), ApiKind::kCompletions);
  EXPECT_EQ(ApiKindOf("/v1/chat/completions/"), ApiKind::kChat);
  auto j = nlohmann::json::parse(RequestBody(ApiKind::kCompletions, "m", "hello", 16));
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["prompt"], "hello");
  EXPECT_EQ(j["max_tokens"], 16);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  j = nlohmann::json::parse(RequestBody(ApiKind::kChat, "", "hi", 4));
  EXPECT_FALSE(j.contains("model"));
  EXPECT_EQ(j["messages"][0]["role"], "user");
  EXPECT_EQ(j["messages"][0]["content"], "hi");
}

}  // namespace
}  // namespace shoal::loadgen
