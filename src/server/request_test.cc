// Unit tests of the server's request intake: safe JSON parsing, typed fields, OpenAI request
// rules (defaults, ranges, prompts, messages, context length), and the metrics text.
#include <gtest/gtest.h>

#include "base/test_support.h"
#include "engine/text_stream.h"
#include "gguf/gguf.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace shoal::server {
namespace {

TEST(ParseJsonObject, RejectsBadInputWithoutThrowing) {
  EXPECT_TRUE(ParseJsonObject(R"({"a": 1})").ok());
  EXPECT_FALSE(ParseJsonObject("[1, 2]").ok());                 // not an object
  EXPECT_FALSE(ParseJsonObject(R"({"a": )").ok());              // truncated
  EXPECT_FALSE(ParseJsonObject("{\"a\": \"\xff\xfe\"}").ok());  // invalid UTF-8
  std::string deep = "{\"a\":" + std::string(65, '[') + std::string(65, ']') + "}";
  EXPECT_FALSE(ParseJsonObject(deep).ok());
  std::string ok_depth = "{\"a\":" + std::string(60, '[') + std::string(60, ']') + "}";
  EXPECT_TRUE(ParseJsonObject(ok_depth).ok());
  // Brackets inside strings do not count as nesting.
  EXPECT_TRUE(ParseJsonObject("{\"a\":\"" + std::string(1000, '[') + "\"}").ok());
}

TEST(JsonFields, TypesAndRanges) {
  const Json j = Json::parse(R"({"i": 5, "f": 2.0, "g": 2.5, "big": 1e300, "neg": -3,
    "s": "x", "b": true, "l": ["a", "b"], "bad": [1]})");
  EXPECT_EQ(**GetInt(j, "i", 0, 10), 5);
  EXPECT_EQ(**GetInt(j, "f", 0, 10), 2);  // integral float accepted
  EXPECT_FALSE(GetInt(j, "g", 0, 10).ok());
  EXPECT_FALSE(GetInt(j, "big", 0, INT64_MAX).ok());
  EXPECT_FALSE(GetInt(j, "neg", 0, 10).ok());
  EXPECT_FALSE(GetInt(j, "s", 0, 10).ok());
  EXPECT_FALSE(GetInt(j, "missing", 0, 10)->has_value());
  EXPECT_FALSE(GetNumber(j, "big", 0, 2).ok());
  EXPECT_DOUBLE_EQ(**GetNumber(j, "g", 0, 3), 2.5);
  EXPECT_TRUE(**GetBool(j, "b"));
  EXPECT_FALSE(GetBool(j, "i").ok());
  EXPECT_EQ(*GetStringOrList(j, "l", 4), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*GetStringOrList(j, "s", 4), (std::vector<std::string>{"x"}));
  EXPECT_FALSE(GetStringOrList(j, "bad", 4).ok());
  EXPECT_FALSE(GetStringOrList(j, "l", 1).ok());
}

class RequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::SharedPath("models/stories260K.gguf");
    if (!testing::Exists(path)) GTEST_SKIP() << "missing " << path;
    file_ = std::move(*gguf::File::Open(path));
    tok_ = std::move(*Tokenizer::FromGguf(*file_));
    info_.name = "m";
    info_.max_model_len = 64;
    info_.tokenizer = tok_.get();
    info_.chat_template = ChatTemplateKind::kChatML;
  }
  std::optional<ApiError> Parse(const std::string& body, bool chat, GenerationRequest* g) {
    return ParseGenerationRequest(Json::parse(body), chat, info_, g);
  }
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Tokenizer> tok_;
  ModelInfo info_;
};

TEST_F(RequestTest, CompletionDefaultsAreOpenAIs) {
  GenerationRequest g;
  ASSERT_FALSE(Parse(R"({"prompt": "Once upon a time"})", false, &g));
  ASSERT_EQ(g.prompts.size(), 1u);
  EXPECT_EQ(g.prompts[0], tok_->Encode("Once upon a time", true, true));
  EXPECT_EQ(g.sampling.temperature, 1.0f);
  EXPECT_EQ(g.sampling.top_p, 1.0f);
  EXPECT_EQ(g.sampling.top_k, 0);
  EXPECT_EQ(g.sampling.min_p, 0.0f);
  // No max_tokens: whatever fits in the model length.
  EXPECT_EQ(g.sampling.max_tokens, 64 - static_cast<int>(g.prompts[0].size()));
  EXPECT_EQ(g.n, 1);
  EXPECT_EQ(g.logprobs, -1);
  EXPECT_FALSE(g.stream);
}

TEST_F(RequestTest, FieldsAreReadAndRangeChecked) {
  GenerationRequest g;
  ASSERT_FALSE(Parse(R"({"prompt": "x", "max_tokens": 5, "temperature": 0, "top_k": 7, "n": 3,
    "seed": 9, "stop": ["a", "b"], "logprobs": 2, "stream": true, "echo": true,
    "stream_options": {"include_usage": true}, "some_unknown_field": {"x": 1}})",
                     false, &g));
  EXPECT_EQ(g.sampling.max_tokens, 5);
  EXPECT_TRUE(g.sampling.greedy());
  EXPECT_EQ(g.sampling.top_k, 7);
  EXPECT_EQ(g.n, 3);
  EXPECT_EQ(g.sampling.seed, 9u);
  EXPECT_EQ(g.sampling.stop.size(), 2u);
  EXPECT_EQ(g.logprobs, 2);
  EXPECT_TRUE(g.stream && g.include_usage && g.echo);
  for (const char* bad :
       {R"({"prompt": "x", "temperature": 2.5})", R"({"prompt": "x", "top_p": 0})",
        R"({"prompt": "x", "n": 0})", R"({"prompt": "x", "n": 17})",
        R"({"prompt": "x", "logprobs": 21})", R"({"prompt": "x", "max_tokens": 0})",
        R"({"prompt": "x", "stream": "yes"})", R"({"prompt": 5})", R"({"prompt": [100000]})",
        R"({"prompt": []})", R"({})"}) {
    auto e = Parse(bad, false, &g);
    ASSERT_TRUE(e.has_value()) << bad;
    EXPECT_EQ(e->status, 400) << bad;
  }
}

TEST_F(RequestTest, ModelNameAndContextLength) {
  GenerationRequest g;
  auto e = Parse(R"({"model": "other", "prompt": "x"})", false, &g);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 404);
  EXPECT_EQ(e->code, "model_not_found");
  EXPECT_FALSE(Parse(R"({"model": "m", "prompt": "x", "max_tokens": 10})", false, &g));
  e = Parse(R"({"prompt": "x", "max_tokens": 64})", false, &g);  // 2 prompt tokens + 64 > 64
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "context_length_exceeded");
}

TEST_F(RequestTest, PromptForms) {
  GenerationRequest g;
  ASSERT_FALSE(Parse(R"({"prompt": ["a", "b c"], "max_tokens": 1})", false, &g));
  EXPECT_EQ(g.prompts.size(), 2u);
  ASSERT_FALSE(Parse(R"({"prompt": [1, 403, 407], "max_tokens": 1})", false, &g));
  EXPECT_EQ(g.prompts[0], (std::vector<int32_t>{1, 403, 407}));
  ASSERT_FALSE(Parse(R"({"prompt": [[1, 2], [3]], "max_tokens": 1})", false, &g));
  EXPECT_EQ(g.prompts.size(), 2u);
}

// Issue #35's LOW findings: an empty prompt, an id of 2^64-1, and a request of 4,096 sequences.
TEST_F(RequestTest, EmptyPromptHugeIdsAndTooManySequencesAre400) {
  GenerationRequest g;
  auto e = Parse(R"({"prompt": ""})", false, &g);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->param, "prompt");
  e = Parse(R"({"prompt": ["a", ""]})", false, &g);
  ASSERT_TRUE(e.has_value());
  e = Parse(R"({"prompt": [[]]})", false, &g);
  ASSERT_TRUE(e.has_value());
  e = Parse(R"({"prompt": [1, 18446744073709551615]})", false, &g);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("18446744073709551615"), std::string::npos) << e->message;
  e = Parse(R"({"prompt": [1, -1]})", false, &g);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("-1"), std::string::npos) << e->message;
  std::string many = R"({"n": 16, "max_tokens": 1, "prompt": [)";
  for (int i = 0; i < 17; ++i) many += std::string(i ? "," : "") + "\"p\"";
  e = Parse(many + "]}", false, &g);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "n");
  EXPECT_FALSE(Parse(R"({"n": 16, "max_tokens": 1, "prompt": ["a", "b"]})", false, &g));
}

// The one output stream of `shoal run` and `shoal serve`: all text at the engine's last token,
// a stop string spread over tokens cut with nothing of it shown, and nothing after a stop.
TEST_F(RequestTest, TextStreamEmitsTheTextAndCutsStopStrings) {
  const std::vector<int32_t> ids = tok_->Encode("Once upon a time there was a girl", false, true);
  ASSERT_GE(ids.size(), 4u);
  SamplingParams sp;
  std::string all;
  TextStream plain(*tok_, sp, {}, true);
  TextUpdate u;
  for (size_t i = 0; i < ids.size(); ++i) {
    u = plain.Push(ids[i], i + 1 == ids.size() ? FinishReason::kLength : FinishReason::kNone);
    all += u.text;
    if (i + 1 < ids.size()) EXPECT_EQ(u.finish, "");
  }
  EXPECT_EQ(u.finish, "length");
  EXPECT_EQ(all, tok_->Decode(ids, false));
  sp.stop = {"a time"};
  TextStream cut(*tok_, sp, {}, true);
  std::string shown, finish;
  for (int32_t id : ids) {
    const TextUpdate v = cut.Push(id, FinishReason::kNone);
    shown += v.text;
    if (finish.empty()) finish = v.finish;
  }
  EXPECT_TRUE(cut.stopped());
  EXPECT_EQ(finish, "stop");
  EXPECT_EQ(shown, "Once upon ");
}

TEST_F(RequestTest, ChatMessagesUseTheTemplate) {
  info_.max_model_len = 512;  // ChatML's markers are many tokens in a 512-token vocabulary
  GenerationRequest g;
  ASSERT_FALSE(Parse(R"({"messages": [{"role": "developer", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Hi"}]}], "max_tokens": 2,
    "logprobs": true, "top_logprobs": 3})",
                     true, &g));
  const std::string want =
      ApplyChatTemplate(ChatTemplateKind::kChatML, {{"system", "Be brief."}, {"user", "Hi"}}, true);
  EXPECT_EQ(g.prompt_texts[0], want);
  EXPECT_EQ(g.prompts[0], tok_->Encode(want, true, true));
  EXPECT_EQ(g.logprobs, 3);
  for (const char* bad :
       {R"({"messages": []})", R"({"messages": [{"role": "wizard", "content": "x"}]})",
        R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
        R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})"})
    EXPECT_TRUE(Parse(bad, true, &g).has_value()) << bad;
  info_.chat_template.reset();
  EXPECT_TRUE(Parse(R"({"messages": [{"role": "user", "content": "x"}]})", true, &g).has_value());
}

TEST(MetricsTest, RendersVllmNamesAndCumulativeBuckets) {
  Metrics m("mod");
  m.AddPromptTokens(7);
  m.AddGenerationTokens(3);
  m.RequestFinished("stop");
  m.ObserveTtft(0.003);
  m.ObserveTtft(0.5);
  EngineStats es;
  es.n_running = 2;
  es.n_waiting = 1;
  es.prefix_hits_total = 32;
  const std::string t = m.Render(es, 4);
  EXPECT_NE(t.find("vllm:prompt_tokens_total{model_name=\"mod\"} 7\n"), std::string::npos);
  EXPECT_NE(t.find("vllm:generation_tokens_total{model_name=\"mod\"} 3\n"), std::string::npos);
  EXPECT_NE(t.find("vllm:num_requests_running{model_name=\"mod\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("vllm:num_requests_waiting{model_name=\"mod\"} 5\n"), std::string::npos);
  EXPECT_NE(t.find("vllm:prefix_cache_hits_total{model_name=\"mod\"} 32\n"), std::string::npos);
  EXPECT_NE(t.find("vllm:request_success_total{finished_reason=\"stop\",model_name=\"mod\"} 1\n"),
            std::string::npos);
  EXPECT_NE(t.find("vllm:time_to_first_token_seconds_bucket{le=\"0.001\",model_name=\"mod\"} 0\n"),
            std::string::npos);
  EXPECT_NE(t.find("vllm:time_to_first_token_seconds_bucket{le=\"0.005\",model_name=\"mod\"} 1\n"),
            std::string::npos);
  EXPECT_NE(t.find("vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"mod\"} 2\n"),
            std::string::npos);
  EXPECT_NE(t.find("vllm:time_to_first_token_seconds_count{model_name=\"mod\"} 2\n"),
            std::string::npos);
}

TEST(MetricsTest, RendersStageLoadWithEscapedNodeNames) {
  Metrics m("mod");
  EXPECT_EQ(m.Render(EngineStats{}, 0).find("shoal_stage"), std::string::npos);
  const StageMetrics st[] = {{0, "a\"b\\c", 0.25, 100.5, 3.5, 42, 10},
                             {1, "n2", 1.0, 100.5, 7.0, 42, 10}};
  const std::string t = m.Render(EngineStats{}, 0, st);
  EXPECT_NE(t.find("# TYPE shoal_stage_busy_fraction gauge\n"), std::string::npos);
  EXPECT_NE(t.find("shoal_stage_busy_fraction{model_name=\"mod\",stage=\"0\",node=\"a\\\"b\\\\c\"} "
                   "0.25\n"),
            std::string::npos);
  EXPECT_NE(t.find("shoal_stage_busy_fraction{model_name=\"mod\",stage=\"1\",node=\"n2\"} 1\n"),
            std::string::npos);
  EXPECT_NE(
      t.find("shoal_stage_tokens_per_second{model_name=\"mod\",stage=\"1\",node=\"n2\"} 100.5\n"),
      std::string::npos);
  EXPECT_NE(t.find("# TYPE shoal_stage_busy_seconds_total counter\n"), std::string::npos);
  EXPECT_NE(
      t.find("shoal_stage_tokens_total{model_name=\"mod\",stage=\"0\",node=\"a\\\"b\\\\c\"} 42\n"),
      std::string::npos);
  EXPECT_NE(t.find("last 10 s"), std::string::npos);
}

}  // namespace
}  // namespace shoal::server

namespace shoal::server {
namespace {

// The router's extensions: return_token_ids, and "resume" (validated: one prompt, n = 1, valid
// ids, a text size in range, fewer tokens than max_tokens, which still counts them).
TEST_F(RequestTest, ResumeIsValidatedAndCountsAgainstMaxTokens) {
  GenerationRequest g;
  ASSERT_FALSE(Parse(R"({"prompt": "x", "max_tokens": 10, "return_token_ids": true,
    "resume": {"token_ids": [5, 6, 7], "text_bytes": 4}})",
                     false, &g));
  EXPECT_TRUE(g.return_token_ids);
  EXPECT_EQ(g.resume_ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(g.resume_text_bytes, 4);
  EXPECT_EQ(g.sampling.max_tokens, 7);
  for (const char* bad : {
           R"({"prompt": "x", "resume": [1]})",
           R"({"prompt": "x", "resume": {"token_ids": [1]}})",
           R"({"prompt": "x", "resume": {"token_ids": [1], "text_bytes": -1}})",
           R"({"prompt": "x", "resume": {"token_ids": [1], "text_bytes": 65}})",
           R"({"prompt": "x", "resume": {"token_ids": [-1], "text_bytes": 0}})",
           R"({"prompt": "x", "resume": {"token_ids": [99999999], "text_bytes": 0}})",
           R"({"prompt": "x", "resume": {"token_ids": ["a"], "text_bytes": 0}})",
           R"({"prompt": "x", "resume": {"token_ids": 3, "text_bytes": 0}})",
           R"({"prompt": "x", "n": 2, "resume": {"token_ids": [1], "text_bytes": 0}})",
           R"({"prompt": ["x", "y"], "resume": {"token_ids": [1], "text_bytes": 0}})",
           R"({"prompt": "x", "max_tokens": 2, "resume": {"token_ids": [1, 2], "text_bytes": 0}})",
           R"({"prompt": "x", "return_token_ids": 1})",
       }) {
    GenerationRequest r;
    EXPECT_TRUE(Parse(bad, false, &r).has_value()) << bad;
  }
}

}  // namespace
}  // namespace shoal::server
