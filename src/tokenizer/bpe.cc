// Byte-level BPE encoding (llama.cpp's llm_tokenizer_bpe): split with the pre-tokenizer, then in
// each word merge the adjacent pair with the lowest merge rank until none is left.
#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace shoal::tok {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t begin;  // byte offset in the word
  size_t n;      // 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  size_t size;
};

// Lowest rank first; on ties the leftmost pair.
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class BpeWord {
 public:
  BpeWord(const Vocab& vocab, std::string_view word) : vocab_(vocab), word_(word) {}

  void Encode(bool whole, std::vector<int32_t>* out) {
    if (whole) {
      symbols_.push_back({-1, -1, 0, word_.size()});
    } else {
      for (size_t offs = 0; offs < word_.size();) {
        const size_t len = std::min(Utf8SeqLen(word_[offs]), word_.size() - offs);
        const int index = static_cast<int>(symbols_.size());
        symbols_.push_back({index - 1, offs + len == word_.size() ? -1 : index + 1, offs, len});
        offs += len;
      }
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) TryAddBigram(i - 1, i);
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[b.left];
      Symbol& right = symbols_[b.right];
      // Both alive means right still follows left, so equal size means equal text.
      if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = b.left;
      TryAddBigram(left.prev, b.left);
      TryAddBigram(b.left, left.next);
    }
    for (const Symbol& sym : symbols_) {
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
  void TryAddBigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const Symbol& l = symbols_[left];
    const Symbol& r = symbols_[right];
    const int32_t rank = vocab_.BpeRank(word_.substr(l.begin, l.n), word_.substr(r.begin, r.n));
    if (rank < 0) return;
    queue_.push({left, right, rank, l.n + r.n});
  }

  const Vocab& vocab_;
  std::string_view word_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue_;
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
