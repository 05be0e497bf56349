// Byte-level BPE encoding (llama.cpp's llm_tokenizer_bpe): split with the pre-tokenizer, then in
// each word merge the adjacent pair with the lowest merge rank until none is left.
#include <cstdio>

#include "tokenizer/bigram_merge.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace shoal::tok {
namespace {

class BpeWord {
 public:
  BpeWord(const Vocab& vocab, std::string_view word) : vocab_(vocab), word_(word) {}

  void Encode(bool whole, std::vector<int32_t>* out) {
    if (whole) {
      symbols_.push_back({-1, -1, 0, word_.size()});
    } else {
      symbols_ = SplitUtf8Symbols(word_);
    }
    // Lowest merge rank first (ranks are < 2^31, exact as doubles).
    MergeBigrams(symbols_, [this](int left, int right) -> std::optional<double> {
      const MergeSymbol& l = symbols_[left];
      const MergeSymbol& r = symbols_[right];
      const int32_t rank = vocab_.BpeRank(word_.substr(l.begin, l.n), word_.substr(r.begin, r.n));
      if (rank < 0) return std::nullopt;
      return -static_cast<double>(rank);
    });
    for (const MergeSymbol& sym : symbols_) {
      if (sym.n == 0) continue;
      const std::string_view s = word_.substr(sym.begin, sym.n);
      const int32_t id = vocab_.TextToToken(s);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
      for (char c : s) {  // not a token: byte by byte, dropping bytes without a token
        int32_t byte_id;
        if (vocab_.byte_encode) {
          byte_id = vocab_.TextToToken(std::string_view(&c, 1));
        } else {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "<0x%02X>", static_cast<uint8_t>(c));
          byte_id = vocab_.TextToToken(hex);
        }
        if (byte_id >= 0) out->push_back(byte_id);
      }
    }
  }

 private:
  const Vocab& vocab_;
  std::string_view word_;
  std::vector<MergeSymbol> symbols_;
};

bool OnlyNewlines(std::string_view s) { return s.find_first_not_of('\n') == std::string::npos; }

}  // namespace

void Vocab::EncodeBpe(std::string_view text, std::vector<int32_t>* out) const {
  if (model == "whitespace") {
    // llama.cpp's whitespace session: drop whitespace, tokenize each run of the rest.
    std::string segment;
    auto flush = [&] {
      if (segment.empty()) return;
      const std::string seg = std::move(segment);
      segment.clear();
      for (const std::string& word : splitter->Split(seg, byte_encode)) {
        BpeWord(*this, word).Encode(ignore_merges && TextToToken(word) >= 0, out);
      }
    };
    for (uint32_t cp : DecodeUtf8(text)) {
      if (CodepointFlags(cp) & kCpWhitespace) {
        flush();
      } else {
        AppendUtf8(lowercase ? ToLower(cp) : cp, &segment);
      }
    }
    flush();
    return;
  }
  const bool gemma4 = pre_config.name == "gemma4" ||
                      pre_config.name == "granite-embed-multi-311m" || model == "gemma4";
  for (const std::string& word : splitter->Split(text, byte_encode)) {
    bool whole = ignore_merges && TextToToken(word) >= 0;
    if (!whole && gemma4 && OnlyNewlines(word)) whole = TextToToken(word) >= 0;
    BpeWord(*this, word).Encode(whole, out);
  }
}

}  // namespace shoal::tok
