// Tokenizer behaviour beyond the llama.cpp vectors: special-token parsing, BOS/EOS, EOG ids,
// pieces, the streaming detokenizer, and error handling.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "gguf/gguf.h"
#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"

namespace shoal {
namespace {

std::unique_ptr<Tokenizer> Load(const std::string& vocab) {
  const std::string path =
      std::string(SHOAL_SHARED_DIR) + "/testdata/vocab/ggml-vocab-" + vocab + ".gguf";
  auto f = gguf::File::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  if (!f.ok()) return nullptr;
  auto t = Tokenizer::FromGguf(**f);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(TokenizerTest, SpmSpecialTokensAndBos) {
  auto t = Load("llama-spm");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type(), TokenizerType::kSpm);
  EXPECT_TRUE(t->add_bos());
  EXPECT_FALSE(t->add_eos());
  EXPECT_EQ(t->Encode("", true, false), std::vector<int32_t>{1});
  EXPECT_TRUE(t->Encode("", false, false).empty());
  const std::vector<int32_t> hello = t->Encode("Hello", false, false);  // "▁Hello"
  ASSERT_EQ(hello.size(), 1u);
  EXPECT_EQ(t->Token(hello[0]), "\xE2\x96\x81Hello");
  // parse_special turns "<s>"/"</s>" into BOS/EOS; the text after a special token gets the
  // space prefix again.
  std::vector<int32_t> want = {1, 1, hello[0], 2};
  EXPECT_EQ(t->Encode("<s>Hello</s>", true, true), want);
  EXPECT_NE(t->Encode("<s>Hello</s>", true, false), want);
  EXPECT_EQ(t->Encode("<s>Hello</s>", true, false)[1], t->FindToken("\xE2\x96\x81<"));
  EXPECT_TRUE(t->IsEog(2));
  EXPECT_TRUE(t->IsControl(1));
  EXPECT_EQ(t->FindToken("no such token"), -1);
  EXPECT_EQ(t->Token(-5), "");
}

TEST(TokenizerTest, SpmPiecesAndLeadingSpace) {
  auto t = Load("llama-spm");
  ASSERT_NE(t, nullptr);
  const std::vector<int32_t> ids = t->Encode(" Hello world", true, false);
  EXPECT_EQ(t->TokenToPiece(1, true), "<s>");
  EXPECT_EQ(t->TokenToPiece(1, false), "");
  EXPECT_EQ(t->TokenToPiece(t->FindToken("<0x41>"), false), "A");
  // llama_detokenize removes one leading space from the first piece only: after a BOS (whose
  // piece is empty without `special`) the space of " Hello" stays.
  EXPECT_EQ(t->Decode(ids, false), "  Hello world");
  EXPECT_EQ(t->Decode(ids, true), "<s>  Hello world");
  EXPECT_EQ(t->Decode(t->Encode("Hello", false, false), false), "Hello");
}

TEST(TokenizerTest, Phi3ControlTokensStripFollowingWhitespace) {
  auto t = Load("phi-3");
  ASSERT_NE(t, nullptr);
  const int32_t user = t->FindToken("<|user|>"), end = t->FindToken("<|end|>");
  const int32_t assistant = t->FindToken("<|assistant|>");
  const int32_t hello = t->FindToken("\xE2\x96\x81Hello");
  ASSERT_GE(hello, 0);
  // general.name "Phi3": every special token strips whitespace to its right (llama.cpp rule).
  EXPECT_EQ(t->Encode("<|user|>\nHello<|end|>\n<|assistant|>", true, true),
            (std::vector<int32_t>{1, user, hello, end, assistant}));
  EXPECT_TRUE(t->IsEog(end));
  EXPECT_TRUE(t->IsEog(t->FindToken("<|endoftext|>")));
  EXPECT_FALSE(t->IsEog(user));
}

TEST(TokenizerTest, BpeSpecialTokens) {
  auto t = Load("gpt-2");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type(), TokenizerType::kBpe);
  EXPECT_FALSE(t->add_bos());
  EXPECT_EQ(t->bos(), 50256);
  EXPECT_TRUE(t->IsEog(50256));
  EXPECT_EQ(t->Encode("Hi<|endoftext|>", true, true).back(), 50256);
  EXPECT_NE(t->Encode("Hi<|endoftext|>", true, false).back(), 50256);
  EXPECT_EQ(t->TokenToPiece(t->FindToken("\xC4\xA0world"), false), " world");  // "Ġworld"
  EXPECT_EQ(t->Decode(t->Encode("Hello , world !", false, false), false), "Hello, world!");
  const std::vector<int32_t>& eog = t->EogTokens();
  EXPECT_TRUE(std::is_sorted(eog.begin(), eog.end()));
}

TEST(TokenizerTest, WordPieceAddsClsAndSep) {
  auto t = Load("bert-bge");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type(), TokenizerType::kWpm);
  const std::vector<int32_t> ids = t->Encode("Hello world", true, false);
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 101);
  EXPECT_EQ(ids.back(), 102);
  EXPECT_EQ(t->Decode(ids, false), " hello world");
}

// Streams `ids` and checks that no chunk ends inside a UTF-8 character and that the
// concatenation equals Decode.
void CheckStreaming(const Tokenizer& t, const std::vector<int32_t>& ids, bool special) {
  StreamingDetokenizer detok(t, special);
  std::vector<std::string> chunks;
  for (int32_t id : ids) chunks.push_back(detok.Push(id));
  chunks.push_back(detok.Flush());
  EXPECT_FALSE(tok::SplitsCharacter(chunks));
  std::string streamed;
  for (const std::string& c : chunks) streamed += c;
  EXPECT_EQ(streamed, t.Decode(ids, special));
}

TEST(StreamingDetokenizerTest, HoldsBackPartialCharacters) {
  auto t = Load("llama-spm");
  ASSERT_NE(t, nullptr);
  const int32_t e2 = t->FindToken("<0xE2>"), x82 = t->FindToken("<0x82>");
  const int32_t xac = t->FindToken("<0xAC>");
  StreamingDetokenizer detok(*t);
  EXPECT_EQ(detok.Push(t->FindToken("\xE2\x96\x81"
                                    "cost")),
            "cost");  // leading space dropped
  EXPECT_EQ(detok.Push(t->FindToken("<0x20>")), " ");
  EXPECT_EQ(detok.Push(e2), "");
  EXPECT_EQ(detok.Push(x82), "");
  EXPECT_EQ(detok.Push(xac), "\xE2\x82\xAC");  // the euro sign, once complete
  EXPECT_EQ(detok.Push(e2), "");
  EXPECT_EQ(detok.Flush(), "\xE2");  // raw by default
  StreamingDetokenizer replacing(*t, false, /*replace_invalid=*/true);
  EXPECT_EQ(replacing.Push(e2), "");
  EXPECT_EQ(replacing.Push(t->FindToken("<0x41>")),
            "\xEF\xBF\xBD"
            "A");
  EXPECT_EQ(replacing.Push(e2), "");
  EXPECT_EQ(replacing.Flush(), "\xEF\xBF\xBD");
}

TEST(StreamingDetokenizerTest, EqualsDecodeOnText) {
  const std::string text =
      "Hello , world ! It 's a test ' quoted ' . Caf\xC3\xA9 \xF0\x9F\xA6\x99 \xE6\x97\xA5\xE6\x9C"
      "\xAC I 've 'll 're 'm 'd ?!  \n\n\t end ";
  for (const char* vocab : {"llama-spm", "gpt-2", "deepseek-llm", "bert-bge", "phi-3"}) {
    SCOPED_TRACE(vocab);
    auto t = Load(vocab);
    ASSERT_NE(t, nullptr);
    CheckStreaming(*t, t->Encode(text, true, false), false);
    CheckStreaming(*t, t->Encode(text, true, false), true);
  }
}

TEST(StreamingDetokenizerTest, EqualsDecodeOnRandomIds) {
  std::mt19937 rng(1234);
  for (const char* vocab : {"llama-spm", "gpt-2", "falcon"}) {
    SCOPED_TRACE(vocab);
    auto t = Load(vocab);
    ASSERT_NE(t, nullptr);
    std::uniform_int_distribution<int32_t> any(0, t->n_vocab() - 1);
    std::uniform_int_distribution<int32_t> low(0, 300);  // bytes, spaces, punctuation
    for (int round = 0; round < 200; ++round) {
      std::vector<int32_t> ids;
      for (int i = 0; i < 12; ++i) ids.push_back(round % 2 ? any(rng) : low(rng));
      CheckStreaming(*t, ids, round % 3 == 0);
    }
  }
}

// Writes a vocabulary-only GGUF with `fill` and loads it.
Result<std::unique_ptr<Tokenizer>> FromSynthetic(const std::string& name,
                                                 const std::function<void(gguf::Writer&)>& fill) {
  gguf::Writer w;
  fill(w);
  const std::string path = ::testing::TempDir() + "/shoal_tok_" + name + ".gguf";
  SHOAL_RETURN_IF_ERROR(w.Write(path));
  SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> f, gguf::File::Open(path));
  return Tokenizer::FromGguf(*f);
}

void TinyBpe(gguf::Writer& w) {
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", "gpt-2");
  w.SetStringArray("tokenizer.ggml.tokens", {"a", "b", "c", "ab", "abc", "\xC4\xA0", "<eos>"});
  w.SetStringArray("tokenizer.ggml.merges", {"a b", "ab c", "\xC4\xA0 a"});
  w.SetI32Array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 3});
  w.SetU32("tokenizer.ggml.eos_token_id", 6);
}

TEST(TokenizerTest, BpeMergesByRankAndDropsBytesWithoutToken) {
  auto t = FromSynthetic("tiny_bpe", TinyBpe);
  ASSERT_TRUE(t.ok()) << t.status().message();
  // "abc" merges a+b then ab+c; in "Ġabd" a+b wins over Ġ+a (rank 0 < 2), and "d" has no token.
  EXPECT_EQ((*t)->Encode("abc abd", false, false), (std::vector<int32_t>{4, 5, 3}));
  EXPECT_EQ((*t)->Encode("abc<eos>", true, true), (std::vector<int32_t>{4, 6}));
  EXPECT_TRUE((*t)->IsEog(6));
  EXPECT_EQ((*t)->bos(), -1);  // BPE's default BOS id 11 is outside this vocabulary
}

TEST(TokenizerTest, MetadataErrors) {
  auto expect_error = [](const std::string& name, const std::function<void(gguf::Writer&)>& fill,
                         const std::string& fragment) {
    auto t = FromSynthetic(name, fill);
    ASSERT_FALSE(t.ok()) << name;
    EXPECT_NE(t.status().message().find(fragment), std::string::npos) << t.status().message();
  };
  expect_error(
      "no_model", [](gguf::Writer& w) { w.SetStringArray("tokenizer.ggml.tokens", {"a"}); },
      "tokenizer.ggml.model");
  expect_error(
      "t5",
      [](gguf::Writer& w) {
        TinyBpe(w);
        w.SetString("tokenizer.ggml.model", "t5");
      },
      "unsupported tokenizer model");
  expect_error(
      "bad_pre",
      [](gguf::Writer& w) {
        TinyBpe(w);
        w.SetString("tokenizer.ggml.pre", "x");
      },
      "unknown pre-tokenizer");
  expect_error(
      "no_merges",
      [](gguf::Writer& w) {
        w.SetString("tokenizer.ggml.model", "gpt2");
        w.SetStringArray("tokenizer.ggml.tokens", {"a"});
      },
      "tokenizer.ggml.merges");
  expect_error(
      "duplicate",
      [](gguf::Writer& w) {
        w.SetString("tokenizer.ggml.model", "llama");
        w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "a"});
      },
      "duplicate token");
  expect_error(
      "add_bos_without_bos",
      [](gguf::Writer& w) {
        TinyBpe(w);
        w.SetBool("tokenizer.ggml.add_bos_token", true);
      },
      "BOS");
}

}  // namespace
}  // namespace shoal
