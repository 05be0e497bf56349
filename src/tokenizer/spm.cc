// SentencePiece-style encoding (llama.cpp's llm_tokenizer_spm): start from UTF-8 characters,
// repeatedly merge the adjacent pair whose concatenation is the highest-scoring token, then
// re-segment anything that is not a token into the pieces it was merged from, or into bytes.
#include <unordered_map>

#include "tokenizer/bigram_merge.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace shoal::tok {
namespace {

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void Encode(std::vector<int32_t>* out) {
    symbols_ = SplitUtf8Symbols(text_);
    // Highest token score first; remember each merge to re-segment non-tokens later.
    MergeBigrams(symbols_, [this](int left, int right) -> std::optional<double> {
      const std::string_view s = Text(symbols_[left].begin, symbols_[left].n + symbols_[right].n);
      const int32_t id = vocab_.TextToToken(s);
      if (id < 0) return std::nullopt;
      rev_merge_[s] = {left, right};
      return vocab_.tokens[id].score;
    });
    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) {
      Resegment(symbols_[i], out);
    }
  }

 private:
  std::string_view Text(size_t begin, size_t n) const { return text_.substr(begin, n); }

  void Resegment(const MergeSymbol& sym, std::vector<int32_t>* out) {
    const std::string_view s = Text(sym.begin, sym.n);
    const int32_t id = vocab_.TextToToken(s);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
    auto it = rev_merge_.find(s);
    if (it == rev_merge_.end()) {
      for (char c : s) out->push_back(vocab_.ByteToToken(static_cast<uint8_t>(c)));
      return;
    }
    const auto [l, r] = it->second;
    Resegment(symbols_[l], out);
    Resegment(symbols_[r], out);
  }

  const Vocab& vocab_;
  std::string_view text_;
  std::vector<MergeSymbol> symbols_;
  std::unordered_map<std::string_view, std::pair<int, int>> rev_merge_;
};

}  // namespace

void Vocab::EncodeSpm(std::string_view text, std::vector<int32_t>* out) const {
  SpmSession(*this, text).Encode(out);
}

}  // namespace shoal::tok
