// Tokenizer vs llama.cpp's tokenizer test vectors (ggml-vocab-*.gguf.inp/.out from llama.cpp's
// models/ directory, made with add_special=false, parse_special=false): one test per vocabulary.
#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gguf/gguf.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tokenizer.h"

namespace shoal {
namespace {

// $SHOAL_TOKENIZER_VOCAB_DIR (a folder laid out like testdata/vocab) replaces the default, to
// check vocabularies whose GGUF is not shipped (e.g. one converted from a model's tokenizer.json).
const std::string kVocabDir = std::getenv("SHOAL_TOKENIZER_VOCAB_DIR")
                                  ? std::string(std::getenv("SHOAL_TOKENIZER_VOCAB_DIR")) + "/"
                                  : std::string(SHOAL_SHARED_DIR) + "/testdata/vocab/";

using tok::ReadTestFile;

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// Parses the .inp/.out pair the way llama.cpp's test-tokenizer-0 does.
std::vector<Case> ReadCases(const std::string& name) {
  const std::string base = kVocabDir + "ggml-vocab-" + name + ".gguf";
  const std::string raw = ReadTestFile(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::ifstream out(base + ".out");
  std::vector<Case> cases;
  std::string line;
  for (size_t i = 0; i < inputs.size() && std::getline(out, line); ++i) {
    Case c{inputs[i], {}};
    std::istringstream ls(line);
    for (int32_t id; ls >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<std::string> VocabNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kVocabDir, ec)) {
    const std::string f = e.path().filename().string();
    const std::string prefix = "ggml-vocab-", suffix = ".gguf.inp";
    if (f.starts_with(prefix) && f.ends_with(suffix)) {
      names.push_back(f.substr(prefix.size(), f.size() - prefix.size() - suffix.size()));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string Ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

class VocabTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string path = kVocabDir + "ggml-vocab-" + GetParam() + ".gguf";
    if (!std::filesystem::exists(path)) {
      GTEST_SKIP() << "ggml-vocab-" << GetParam()
                   << ".gguf is not in testdata (only its .inp/.out are); cannot test";
    }
    auto f = gguf::File::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().message();
    auto t = Tokenizer::FromGguf(**f);
    ASSERT_TRUE(t.ok()) << t.status().message();
    tokenizer_ = std::move(*t);
    cases_ = ReadCases(GetParam());
    ASSERT_FALSE(cases_.empty());
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<Case> cases_;
};

TEST_P(VocabTest, EncodeMatchesLlamaCpp) {
  int passed = 0;
  for (const Case& c : cases_) {
    const std::vector<int32_t> got = tokenizer_->Encode(c.text, false, false);
    if (got == c.ids) {
      ++passed;
    } else {
      ADD_FAILURE() << "text '" << c.text << "'\n  expected " << Ids(c.ids) << "\n  got      "
                    << Ids(got);
    }
  }
  std::printf("[ vocab    ] %s: %d/%zu strings encode as llama.cpp\n", GetParam().c_str(), passed,
              cases_.size());
}

// Decode(Encode(s)) gives back s: exactly for SPM (the space prefix added by Encode is removed
// by Decode) and for byte-level BPE without clean-up; with clean_up_tokenization_spaces, s after
// the same clean-up. WordPiece normalizes (lowercase, accents, [UNK]), so it is not checked.
TEST_P(VocabTest, DecodeRoundTrips) {
  if (tokenizer_->type() == TokenizerType::kWpm) GTEST_SKIP() << "WordPiece is lossy";
  int passed = 0;
  for (const Case& c : cases_) {
    std::string want = c.text;
    if (tokenizer_->vocab().clean_spaces) tok::CleanSpaces(&want);
    const std::string got = tokenizer_->Decode(tokenizer_->Encode(c.text, false, false), false);
    if (got == want) {
      ++passed;
    } else {
      ADD_FAILURE() << "text '" << c.text << "' decoded as '" << got << "'";
    }
  }
  std::printf("[ vocab    ] %s: %d/%zu strings round-trip\n", GetParam().c_str(), passed,
              cases_.size());
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVectors, VocabTest, ::testing::ValuesIn(VocabNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace shoal
