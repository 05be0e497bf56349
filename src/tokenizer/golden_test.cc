// Tokenizer vs llama.cpp on real prompts: testdata/golden/<model>.golden.json holds prompt ids
// (add_special and parse_special on) and token_to_piece(special=true) pieces for prompts and for
// 64 generated tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace shoal {
namespace {

const std::string kShared = SHOAL_SHARED_DIR;

using tok::ReadTestFile;

std::string Hex(std::string_view s) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : s) {
    out += kDigits[static_cast<uint8_t>(c) >> 4];
    out += kDigits[static_cast<uint8_t>(c) & 15];
  }
  return out;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto f = gguf::File::Open(kShared + "/models/" + GetParam() + ".gguf");
    ASSERT_TRUE(f.ok()) << f.status().message();
    auto t = Tokenizer::FromGguf(**f);
    ASSERT_TRUE(t.ok()) << t.status().message();
    tokenizer_ = std::move(*t);
    golden_ = nlohmann::json::parse(
        ReadTestFile(kShared + "/testdata/golden/" + GetParam() + ".golden.json"));
    ASSERT_EQ(golden_["prompts"].size(), 6u);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  nlohmann::json golden_;
};

TEST_P(GoldenTest, VocabularyMetadata) {
  EXPECT_EQ(tokenizer_->n_vocab(), golden_["n_vocab"].get<int>());
  EXPECT_EQ(tokenizer_->add_bos(), golden_["add_bos"].get<bool>());
  EXPECT_EQ(tokenizer_->type(), TokenizerType::kSpm);
  EXPECT_EQ(tokenizer_->bos(), 1);
  EXPECT_EQ(tokenizer_->eos(), 2);
  EXPECT_TRUE(tokenizer_->IsEog(2));
  EXPECT_FALSE(tokenizer_->IsEog(1));
}

TEST_P(GoldenTest, PromptIdsMatchLlamaCpp) {
  for (const auto& p : golden_["prompts"]) {
    const std::string text =
        ReadTestFile(kShared + "/testdata/golden/" + p["prompt_file"].get<std::string>());
    const auto want = p["prompt_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer_->Encode(text, /*add_special=*/true, /*parse_special=*/true), want)
        << p["name"];
  }
}

// Pieces in the JSON show a byte token's lone byte as U+FFFD, so compare sanitized pieces.
TEST_P(GoldenTest, PiecesMatchLlamaCpp) {
  for (const auto& p : golden_["prompts"]) {
    const auto check = [&](const nlohmann::json& ids, const nlohmann::json& pieces) {
      ASSERT_EQ(ids.size(), pieces.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        const int32_t id = ids[i].get<int32_t>();
        EXPECT_EQ(tok::SanitizeUtf8(tokenizer_->TokenToPiece(id, true)),
                  pieces[i].get<std::string>())
            << p["name"] << " id " << id;
      }
    };
    check(p["prompt_ids"], p["prompt_pieces"]);
    check(p["greedy"]["ids"], p["greedy"]["pieces"]);
  }
}

// greedy.text_hex is the exact byte concatenation of the generated pieces.
TEST_P(GoldenTest, GeneratedBytesMatchLlamaCpp) {
  for (const auto& p : golden_["prompts"]) {
    std::string bytes;
    for (int32_t id : p["greedy"]["ids"].get<std::vector<int32_t>>()) {
      bytes += tokenizer_->TokenToPiece(id, true);
    }
    EXPECT_EQ(Hex(bytes), p["greedy"]["text_hex"].get<std::string>()) << p["name"];
  }
}

TEST_P(GoldenTest, StreamingDetokenizerEqualsDecode) {
  for (const auto& p : golden_["prompts"]) {
    std::vector<int32_t> ids = p["prompt_ids"].get<std::vector<int32_t>>();
    for (int32_t id : p["greedy"]["ids"].get<std::vector<int32_t>>()) ids.push_back(id);
    for (bool special : {false, true}) {
      StreamingDetokenizer detok(*tokenizer_, special);
      std::vector<std::string> chunks;
      for (int32_t id : ids) chunks.push_back(detok.Push(id));
      chunks.push_back(detok.Flush());
      EXPECT_FALSE(tok::SplitsCharacter(chunks)) << p["name"];
      std::string streamed;
      for (const std::string& c : chunks) streamed += c;
      EXPECT_EQ(streamed, tokenizer_->Decode(ids, special)) << p["name"];
    }
  }
}

// llama-perplexity tokenizes its text once with BOS (parse_special off).
TEST(GoldenPerplexityText, TokenCountMatchesLlamaCpp) {
  auto f = gguf::File::Open(kShared + "/models/stories260K.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto t = Tokenizer::FromGguf(**f);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto ref =
      nlohmann::json::parse(ReadTestFile(kShared + "/testdata/golden/stories260K.perplexity.json"));
  const std::string text = ReadTestFile(kShared + "/testdata/golden/ppl_story.txt");
  EXPECT_EQ((*t)->Encode(text, true, false).size(), ref["n_tokens_with_bos"].get<size_t>());
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest,
                         ::testing::Values("stories260K", "llama-2-tiny-random"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<uint8_t>(c)) ? c : '_';
                           return n;
                         });

}  // namespace
}  // namespace shoal
