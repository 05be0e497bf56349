// Internal vocabulary state shared by the tokenizer implementations (not part of the public API).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex_split.h"
#include "tokenizer/tokenizer.h"

namespace shoal::tok {

// Token attributes (llama_token_attr bits).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1 << 0,
  kAttrUnused = 1 << 1,
  kAttrNormal = 1 << 2,
  kAttrControl = 1 << 3,
  kAttrUserDefined = 1 << 4,
  kAttrByte = 1 << 5,
  kAttrNormalized = 1 << 6,
  kAttrLstrip = 1 << 7,
  kAttrRstrip = 1 << 8,
  kAttrSingleWord = 1 << 9,
};

struct TokenData {
  std::string text;
  float score = 0;
  uint32_t attr = kAttrNormal;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringPair = std::pair<std::string, std::string>;
using StringViewPair = std::pair<std::string_view, std::string_view>;
struct PairHash {
  using is_transparent = void;
  size_t operator()(StringViewPair p) const {
    const size_t a = std::hash<std::string_view>{}(p.first);
    return a ^ (std::hash<std::string_view>{}(p.second) + 0x9E3779B97F4A7C15ull + (a << 6));
  }
  size_t operator()(const StringPair& p) const {
    return (*this)(StringViewPair(p.first, p.second));
  }
};
struct PairEq {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return std::string_view(a.first) == std::string_view(b.first) &&
           std::string_view(a.second) == std::string_view(b.second);
  }
};

struct Vocab {
  TokenizerType type = TokenizerType::kSpm;
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre
  std::vector<TokenData> tokens;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> token_to_id;
  std::unordered_map<StringPair, int32_t, PairHash, PairEq> bpe_ranks;
  std::vector<int32_t> special_tokens;  // control/user-defined/unknown, longest text first
  std::vector<std::string> pieces;      // TokenToPiece(id, special=true)
  std::vector<int32_t> eog;             // sorted
  std::vector<uint8_t> is_eog;          // per id
  size_t max_token_len = 0;

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;

  bool add_space_prefix = false;
  bool add_bos = false;
  bool add_eos = false;
  bool add_sep = false;
  bool ignore_merges = false;
  bool clean_spaces = false;
  bool escape_whitespaces = true;
  bool byte_encode = true;
  bool lowercase = true;      // WordPiece normalizer
  bool strip_accents = true;  // WordPiece normalizer
  PreTokenizerConfig pre_config;
  std::unique_ptr<RegexSplitter> splitter;  // BPE only

  int32_t n() const { return static_cast<int32_t>(tokens.size()); }
  bool Valid(int32_t id) const { return id >= 0 && id < n(); }
  uint32_t Attr(int32_t id) const { return Valid(id) ? tokens[id].attr : kAttrUndefined; }
  int32_t TextToToken(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
  }
  int32_t BpeRank(std::string_view left, std::string_view right) const {
    auto it = bpe_ranks.find(StringViewPair(left, right));
    return it == bpe_ranks.end() ? -1 : it->second;
  }
  // SPM byte fallback: <0xXX>, else the byte itself as a token, else unk.
  int32_t ByteToToken(uint8_t byte) const;
  // llama_token_to_piece(special=true) without the cache.
  std::string ComputePiece(int32_t id) const;

  // Tokenizers for one raw-text fragment (no special tokens inside), appending to `out`.
  void EncodeSpm(std::string_view text, std::vector<int32_t>* out) const;
  void EncodeBpe(std::string_view text, std::vector<int32_t>* out) const;
  void EncodeWpm(std::string_view text, std::vector<int32_t>* out) const;
};

// Builds the vocabulary from tokenizer.ggml.* metadata (vocab_load.cc).
Result<std::unique_ptr<Vocab>> LoadVocab(const gguf::File& f);

// The clean_up_tokenization_spaces passes of llama.cpp's detokenizer, in place.
void CleanSpaces(std::string* text);

}  // namespace shoal::tok
