// Tests that Shoal's llama.cpp-compatible tokenizer loads the synthesized SPM vocabulary and
// builds whole words from it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/test_support.h"
#include "gguf/gguf.h"
#include "modelgen/synth.h"
#include "tokenizer/tokenizer.h"

namespace shoal {
namespace {

using testing::TempDir;

TEST(SynthVocabTest, TokenizerBuildsWholeWords) {
  TempDir dir;
  SynthOptions opt;
  const std::string path = dir.File("tiny.gguf");
  ASSERT_TRUE(SynthesizeModel(opt, path).ok());
  auto f = gguf::File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto tok = Tokenizer::FromGguf(**f);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ((*tok)->n_vocab(), 4096);
  EXPECT_EQ((*tok)->bos(), 1);
  EXPECT_EQ((*tok)->eos(), 2);
  EXPECT_TRUE((*tok)->add_bos());

  const std::string text = "Once upon a time there was a little dog";
  const std::vector<int32_t> ids = (*tok)->Encode(text, /*add_special=*/true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
  // One token per word: "▁Once", "▁upon", "▁a", ...
  EXPECT_EQ(ids.size(), 1u + 9);
  for (size_t k = 1; k < ids.size(); ++k) {
    EXPECT_TRUE((*tok)->Token(ids[k]).starts_with("\xe2\x96\x81")) << (*tok)->Token(ids[k]);
  }
  // Without BOS (a BOS piece would take the removal of the first space, as in llama.cpp).
  const std::vector<int32_t> words(ids.begin() + 1, ids.end());
  EXPECT_EQ((*tok)->Decode(words, /*special=*/false), text);

  // Words outside the list still tokenize into multi-character pieces; bytes fall back.
  const std::string other = "Zebras quietly munch xylophones, 42 times! \xc3\xa9t\xc3\xa9";
  const std::vector<int32_t> ids2 = (*tok)->Encode(other, false, false);
  EXPECT_LT(ids2.size(), other.size());
  EXPECT_EQ((*tok)->Decode(ids2, false), other);
}

}  // namespace
}  // namespace shoal
