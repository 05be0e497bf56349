// WordPiece encoding (llama.cpp's llm_tokenizer_wpm): BERT-style normalization and word split,
// then greedy longest-match of "U+2581 + word" against the vocabulary; a word with an unmatched
// position becomes [UNK].
#include <algorithm>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace shoal::tok {
namespace {

bool IsChineseChar(uint32_t c) {
  return (c >= 0x04E00 && c <= 0x09FFF) || (c >= 0x03400 && c <= 0x04DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) ||
         (c >= 0x2B920 && c <= 0x2CEAF) ||  // (sic: HF uses 0x2B920, not 0x2B820)
         (c >= 0x0F900 && c <= 0x0FAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Lowercases / strips accents as configured, drops control characters, splits on whitespace and
// makes every punctuation, ASCII symbol and CJK character a word of its own.
std::vector<std::string> Preprocess(std::string_view text, bool lowercase, bool strip_accents) {
  std::vector<std::string> words(1);
  for (uint32_t cp : DecodeUtf8(text)) {
    if (strip_accents) cp = NfdFirst(cp);
    const uint16_t flags = CodepointFlags(cp);
    if (flags & kCpWhitespace) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == 0xFFFD || (flags & kCpControl)) continue;
    if (strip_accents && (flags & kCpMark)) continue;
    std::string s;
    AppendUtf8(lowercase ? ToLower(cp) : cp, &s);
    if ((flags & kCpPunct) || (cp < 0x7F && (flags & kCpSymbol)) || IsChineseChar(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = std::move(s);
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void Vocab::EncodeWpm(std::string_view text, std::vector<int32_t>* out) const {
  for (const std::string& word : Preprocess(text, lowercase, strip_accents)) {
    if (word.empty()) continue;
    const std::string w = "\xE2\x96\x81" + word;
    const size_t n = w.size();
    const size_t start = out->size();
    for (size_t i = 0; i < n; ++i) {
      bool matched = false;
      for (size_t j = std::min(n, i + max_token_len + 1); j > i; --j) {
        const int32_t id = TextToToken(std::string_view(w).substr(i, j - i));
        if (id >= 0) {
          out->push_back(id);
          matched = true;
          i = j - 1;
          break;
        }
      }
      if (!matched) {
        out->resize(start);
        break;
      }
    }
    if (out->size() == start) out->push_back(unk);
  }
}

}  // namespace shoal::tok
