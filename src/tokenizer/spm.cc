// SentencePiece-style encoding (llama.cpp's llm_tokenizer_spm): start from UTF-8 characters,
// repeatedly merge the adjacent pair whose concatenation is the highest-scoring token, then
// re-segment anything that is not a token into the pieces it was merged from, or into bytes.
#include <queue>
#include <unordered_map>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace shoal::tok {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t begin;  // byte offset in the text
  size_t n;      // byte length; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;
};

// Highest score first; on ties the leftmost pair.
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void Encode(std::vector<int32_t>* out) {
    for (size_t offs = 0; offs < text_.size();) {
      const size_t len = std::min(Utf8SeqLen(text_[offs]), text_.size() - offs);
      const int index = static_cast<int>(symbols_.size());
      symbols_.push_back({index - 1, offs + len == text_.size() ? -1 : index + 1, offs, len});
      offs += len;
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) TryAddBigram(i - 1, i);
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[b.left];
      Symbol& right = symbols_[b.right];
      if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;  // stale
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = b.left;
      TryAddBigram(left.prev, b.left);
      TryAddBigram(b.left, left.next);
    }
    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) {
      Resegment(symbols_[i], out);
    }
  }

 private:
  std::string_view Text(size_t begin, size_t n) const { return text_.substr(begin, n); }

  void TryAddBigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view s = Text(symbols_[left].begin, symbols_[left].n + symbols_[right].n);
    const int32_t id = vocab_.TextToToken(s);
    if (id < 0) return;
    queue_.push({left, right, vocab_.tokens[id].score, s.size()});
    rev_merge_[s] = {left, right};
  }

  void Resegment(const Symbol& sym, std::vector<int32_t>* out) {
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
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue_;
  std::unordered_map<std::string_view, std::pair<int, int>> rev_merge_;
};

}  // namespace

void Vocab::EncodeSpm(std::string_view text, std::vector<int32_t>* out) const {
  SpmSession(*this, text).Encode(out);
}

}  // namespace shoal::tok
