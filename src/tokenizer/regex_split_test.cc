// Unicode helpers, the pre-tokenizer table and the regex splitter (hand-written splitters
// against the same patterns run on PCRE2).
#include "tokenizer/regex_split.h"

#include <gtest/gtest.h>

#include <random>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace shoal::tok {
namespace {

TEST(UnicodeTest, DecodeReplacesInvalidBytesOneByOne) {
  EXPECT_EQ(DecodeUtf8("a\xC3\xA9\xE2\x82\xAC"), (std::vector<uint32_t>{'a', 0xE9, 0x20AC}));
  EXPECT_EQ(DecodeUtf8("\xE2\x82"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
  EXPECT_EQ(DecodeUtf8("\x80x\xFF"), (std::vector<uint32_t>{0xFFFD, 'x', 0xFFFD}));
  EXPECT_EQ(DecodeUtf8("\xF0\x9F\xA6\x99"), (std::vector<uint32_t>{0x1F999}));
}

TEST(UnicodeTest, CodepointFlags) {
  EXPECT_EQ(CodepointFlags('A'), kCpLetter);
  EXPECT_EQ(CodepointFlags('7'), kCpNumber);
  EXPECT_EQ(CodepointFlags(' '), kCpSeparator | kCpWhitespace);
  EXPECT_EQ(CodepointFlags('\n'), kCpControl | kCpWhitespace);
  EXPECT_EQ(CodepointFlags(0x1C), kCpControl);  // not White_Space
  EXPECT_EQ(CodepointFlags(0xA0), kCpSeparator | kCpWhitespace);
  EXPECT_EQ(CodepointFlags(0x85), kCpControl | kCpWhitespace);
  EXPECT_EQ(CodepointFlags(0xE9), kCpLetter);
  EXPECT_EQ(CodepointFlags(0x65E5), kCpLetter);
  EXPECT_EQ(CodepointFlags(0x663), kCpNumber);  // Arabic-Indic three
  EXPECT_EQ(CodepointFlags(0x3002), kCpPunct);
  EXPECT_EQ(CodepointFlags(0x20AC), kCpSymbol);
  EXPECT_EQ(CodepointFlags('~'), kCpSymbol);
  EXPECT_EQ(CodepointFlags(0x301), kCpMark);
  EXPECT_EQ(CodepointFlags(0x200D), kCpControl);  // Cf
  EXPECT_EQ(CodepointFlags(0xE000), kCpControl);  // Co
  EXPECT_EQ(CodepointFlags(0x378), kCpUndefined);
  EXPECT_EQ(CodepointFlags(0x110000), kCpUndefined);
}

TEST(UnicodeTest, CaseNfdAndByteMapping) {
  EXPECT_EQ(ToLower('A'), uint32_t{'a'});
  EXPECT_EQ(ToLower('a'), uint32_t{'a'});
  EXPECT_EQ(ToLower(0x130), uint32_t{'i'});
  EXPECT_EQ(ToLower(0x410), 0x430u);
  EXPECT_EQ(ToLower(0x100), 0x101u);
  EXPECT_EQ(ToLower(0x101), 0x101u);
  EXPECT_EQ(NfdFirst(0xE9), uint32_t{'e'});
  EXPECT_EQ(NfdFirst(0x1EED), uint32_t{'u'});
  EXPECT_EQ(NfdFirst(0xAC00), 0x1100u);
  EXPECT_EQ(NfdFirst('x'), uint32_t{'x'});
  EXPECT_EQ(ByteToUnicode(' '), "\xC4\xA0");  // Ġ
  EXPECT_EQ(ByteToUnicode('a'), "a");
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(UnicodeToByte(DecodeUtf8(ByteToUnicode(static_cast<uint8_t>(b)))[0]), b);
  }
  EXPECT_EQ(UnicodeToByte(0x3000), -1);
}

TEST(UnicodeTest, CompletePrefixAndSanitize) {
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE2\x82"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE2\x82\xAC"), 5u);
  EXPECT_EQ(CompleteUtf8Prefix("\xF0\x9F\xA6"), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("a\x80"), 2u);  // a stray continuation byte is final
  EXPECT_EQ(SanitizeUtf8("a\xE2\x82"
                         "b"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong
  EXPECT_EQ(SanitizeUtf8("ok \xE2\x82\xAC"), "ok \xE2\x82\xAC");
}

std::vector<std::string> SplitWith(const std::string& regex, const std::string& text) {
  auto s = RegexSplitter::Create({regex});
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? (*s)->Split(text, /*byte_encode=*/false) : std::vector<std::string>{};
}

TEST(RegexSplitterTest, Gpt2AndLlama3Words) {
  EXPECT_EQ(SplitWith(kGpt2Regex, "Hello world's  end"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " end"}));
  EXPECT_EQ(
      SplitWith(kLlama3Regex, "Hello\n\n  World 12345 I'M"),
      (std::vector<std::string>{"Hello", "\n\n", " ", " World", " ", "123", "45", " I", "'M"}));
  // A category regex runs on the collapsed text; a literal-only one in UTF-8 mode.
  EXPECT_EQ(SplitWith("\\p{N}+", "ab12\xD9\xA3x"),
            (std::vector<std::string>{"ab", "12\xD9\xA3", "x"}));
  EXPECT_EQ(SplitWith("[\\x{4E00}-\\x{9FA5}]+",
                      "a\xE6\x97\xA5\xE6\x9C\xAC"
                      "b"),
            (std::vector<std::string>{"a", "\xE6\x97\xA5\xE6\x9C\xAC", "b"}));
  EXPECT_EQ(SplitWith("\\s+$", "a b  "), (std::vector<std::string>{"a b", "  "}));
  // Zero-width matches cut without producing empty words (superbpe digit groups).
  EXPECT_EQ(SplitWith("(?=(\\d{3})+(?!\\d))", "1234567"),
            (std::vector<std::string>{"1", "234", "567"}));
}

TEST(RegexSplitterTest, ByteEncodeMapsEveryByte) {
  auto s = RegexSplitter::Create({kGpt2Regex});
  ASSERT_TRUE(s.ok());
  // The invalid byte becomes U+FFFD (EF BF BD) first, and each of those bytes is then mapped.
  const std::vector<std::string> want = {
      "\xC4\xA0"
      "a",
      "\xC3\xAF\xC2\xBF\xC2\xBD"};
  EXPECT_EQ((*s)->Split(" a\xFF", true), want);
}

// The hand-written GPT-2 and Llama-3 splitters agree with a regex engine running the same
// pattern (wrapping it in a group selects the PCRE2 path) on random text.
TEST(RegexSplitterTest, CustomSplittersAgreeWithPcre2) {
  const std::vector<uint32_t> alphabet = {
      'a',    'Z',   's',  't',    'l',  'L',    'v',   'e',    'R',    'm',   'd',  '\'',
      '3',    ' ',   ' ',  ' ',    '\t', '\n',   '\r',  '\v',   '.',    '!',   '~',  0xE9,
      0x65E5, 0x663, 0xA0, 0x3000, 0x85, 0x20AC, 0x301, 0x200D, 0xE000, 0x378, 0x1C, 0x1F999};
  std::mt19937 rng(42);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::uniform_int_distribution<int> length(0, 24);
  for (const char* re : {kGpt2Regex, kLlama3Regex}) {
    auto custom = RegexSplitter::Create({re});
    auto pcre = RegexSplitter::Create({std::string("(?:") + re + ")"});
    ASSERT_TRUE(custom.ok() && pcre.ok());
    for (int round = 0; round < 3000; ++round) {
      std::vector<uint32_t> cps;
      for (int n = length(rng); n > 0; --n) cps.push_back(alphabet[pick(rng)]);
      ASSERT_EQ((*custom)->SplitLengths(cps), (*pcre)->SplitLengths(cps))
          << re << " round " << round;
    }
  }
}

TEST(PreTokenizerTest, EveryLlamaCppNameCompiles) {
  const char* names[] = {"",
                         "default",
                         "minicpm5",
                         "llama3",
                         "llama-bpe",
                         "falcon3",
                         "deepseek-llm",
                         "deepseek-coder",
                         "deepseek-v3",
                         "spark2_5",
                         "youtu",
                         "falcon",
                         "mpt",
                         "starcoder",
                         "gpt-2",
                         "phi-2",
                         "jais-2",
                         "gemma4",
                         "sarvam-moe",
                         "jina-v1-en",
                         "whitespace",
                         "refact",
                         "command-r",
                         "qwen2",
                         "qwen35",
                         "stablelm2",
                         "olmo",
                         "dbrx",
                         "smaug-bpe",
                         "poro-chat",
                         "glm4",
                         "viking",
                         "jais",
                         "tekken",
                         "smollm",
                         "codeshell",
                         "bloom",
                         "gpt3-finnish",
                         "exaone",
                         "exaone4",
                         "exaone-moe",
                         "chameleon",
                         "minerva-7b",
                         "megrez",
                         "gpt-4o",
                         "llama4",
                         "granite-embed-multi-97m",
                         "tiny_aya",
                         "superbpe",
                         "trillion",
                         "granite-docling",
                         "bailingmoe",
                         "seed-coder",
                         "hunyuan",
                         "hunyuan-dense",
                         "hy_v4",
                         "joyai-llm",
                         "kimi-k2",
                         "ufakzeka",
                         "grok-2",
                         "afmoe",
                         "laguna",
                         "minimax-m2",
                         "solar-open",
                         "mellum2"};
  const std::string text =
      "Hello, y'all! 3333 \xE6\x88\x91\xE6\x83\xB3 apple 1314151\xE5\xA4\xA9 \xD0\xBD\xD0\xB5"
      " <sentinel:12> IMGIMGABZ \n\n \t x  ";
  const size_t n_cps = DecodeUtf8(text).size();
  for (const char* name : names) {
    auto c = LookupPreTokenizer(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().message();
    auto s = RegexSplitter::Create(c->regexes);
    ASSERT_TRUE(s.ok()) << name << ": " << s.status().message();
    size_t total = 0;
    for (size_t len : (*s)->SplitLengths(DecodeUtf8(text))) total += len;
    EXPECT_EQ(total, n_cps) << name;
  }
  EXPECT_FALSE(LookupPreTokenizer("no-such-pre").ok());
  EXPECT_FALSE(LookupPreTokenizer("deepseek-llm")->clean_spaces);
  EXPECT_TRUE(LookupPreTokenizer("llama-bpe")->ignore_merges);
  EXPECT_FALSE(LookupPreTokenizer("gemma4")->byte_encode);
}

}  // namespace
}  // namespace shoal::tok
