// Hand-written pre-tokenizer splitters with exactly the behaviour of llama.cpp's custom ones
// (GPT-2, Llama-3, Kimi-K2 and AFMoE digit patterns), including their small departures from a
// true regex engine (e.g. a trailing lone whitespace run is split like \s+).
#include "tokenizer/regex_split.h"
#include "tokenizer/unicode.h"

namespace shoal::tok {
namespace {

constexpr uint32_t kNone = 0xFFFFFFFF;  // "codepoint" outside the range being split
constexpr uint16_t kWsLetterNumber = kCpWhitespace | kCpLetter | kCpNumber;

// Cursor over cps[begin, end) that records word boundaries.
class Scanner {
 public:
  Scanner(const std::vector<uint32_t>& cps, size_t begin, size_t end, std::vector<size_t>* lens)
      : cps_(cps), begin_(begin), end_(end), word_start_(begin), lens_(lens) {}

  uint32_t Cp(size_t p) const { return p >= begin_ && p < end_ ? cps_[p] : kNone; }
  // Flags of the codepoint at p, 0 outside the range.
  uint16_t Flags(size_t p) const { return p >= begin_ && p < end_ ? CodepointFlags(cps_[p]) : 0; }
  size_t end() const { return end_; }
  // Ends the current word at p (no-op for an empty word).
  void Emit(size_t p) {
    if (p > word_start_) lens_->push_back(p - word_start_);
    word_start_ = p;
  }
  size_t word_start() const { return word_start_; }

 private:
  const std::vector<uint32_t>& cps_;
  size_t begin_, end_, word_start_;
  std::vector<size_t>* lens_;
};

bool IsNewline(uint32_t c) { return c == '\r' || c == '\n'; }

// Length of an English contraction ('s 't 'm 'd 're 've 'll) starting at p, or 0.
size_t Contraction(const Scanner& s, size_t p, bool ignore_case) {
  if (s.Cp(p) != '\'' || p + 1 >= s.end()) return 0;
  auto low = [&](uint32_t c) { return ignore_case ? ToLower(c) : c; };
  const uint32_t a = low(s.Cp(p + 1));
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (p + 2 >= s.end()) return 0;
  const uint32_t b = low(s.Cp(p + 2));
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// The whitespace alternatives shared by the Llama-3 style patterns:
// \s*[\r\n]+ | \s+(?!\S) | \s+ ; falls back to a single codepoint. Returns the new position.
size_t WhitespaceRun(Scanner& s, size_t pos, bool newline_alternative) {
  size_t n = 0;
  size_t after_last_newline = 0;
  while (s.Flags(pos + n) & kCpWhitespace) {
    if (IsNewline(s.Cp(pos + n))) after_last_newline = pos + n + 1;
    ++n;
  }
  if (newline_alternative && after_last_newline > 0) {
    pos = after_last_newline;
  } else if (n > 1 && s.Cp(pos + n) != kNone) {
    pos += n - 1;  // \s+(?!\S): leave the last whitespace to prefix the next word
  } else if (n > 0) {
    pos += n;
  } else {
    pos += 1;  // nothing matched: a one-codepoint word
  }
  s.Emit(pos);
  return pos;
}

bool IsHan(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0x2CEB0 && c <= 0x2EBEF) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0x2F800 && c <= 0x2FA1F);
}

// \p{N}{1,3} repeated over a run of numbers.
size_t NumberGroups(Scanner& s, size_t pos) {
  size_t group_start = pos;
  while (s.Flags(pos) & kCpNumber) {
    if (++pos - group_start >= 3) {
      s.Emit(pos);
      group_start = pos;
    }
  }
  s.Emit(pos);
  return pos;
}

}  // namespace

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void SplitGpt2(const std::vector<uint32_t>& cps, size_t begin, size_t end,
               std::vector<size_t>* lens) {
  Scanner s(cps, begin, end, lens);
  size_t pos = begin;
  while (pos < end) {
    const uint32_t c = s.Cp(pos);
    if (size_t n = Contraction(s, pos, /*ignore_case=*/false)) {
      pos += n;
      s.Emit(pos);
      continue;
    }
    const uint16_t f = (c == ' ') ? s.Flags(pos + 1) : s.Flags(pos);
    const uint16_t kinds[] = {kCpLetter, kCpNumber};
    bool done = false;
    for (uint16_t kind : kinds) {
      if (f & kind) {  // ' ?\p{L}+' or ' ?\p{N}+'
        pos += (c == ' ');
        while (s.Flags(pos) & kind) ++pos;
        s.Emit(pos);
        done = true;
        break;
      }
    }
    if (done) continue;
    if (!(f & kWsLetterNumber) && f != 0) {  // ' ?[^\s\p{L}\p{N}]+'
      pos += (c == ' ');
      while (!(s.Flags(pos) & kWsLetterNumber) && s.Flags(pos) != 0) ++pos;
      s.Emit(pos);
      continue;
    }
    pos = WhitespaceRun(s, pos, /*newline_alternative=*/false);
  }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
void SplitLlama3(const std::vector<uint32_t>& cps, size_t begin, size_t end,
                 std::vector<size_t>* lens) {
  Scanner s(cps, begin, end, lens);
  size_t pos = begin;
  while (pos < end) {
    const uint32_t c = s.Cp(pos);
    const uint16_t f = s.Flags(pos);
    if (size_t n = Contraction(s, pos, /*ignore_case=*/true)) {
      pos += n;
      s.Emit(pos);
      continue;
    }
    if (!IsNewline(c) && !(f & kCpNumber) && ((f & kCpLetter) || (s.Flags(pos + 1) & kCpLetter))) {
      ++pos;  // the optional leading non-letter, or the first letter
      while (s.Flags(pos) & kCpLetter) ++pos;
      s.Emit(pos);
      continue;
    }
    if (f & kCpNumber) {
      pos = NumberGroups(s, pos);
      continue;
    }
    const uint16_t f2 = (c == ' ') ? s.Flags(pos + 1) : f;
    if (!(f2 & kWsLetterNumber)) {  // ' ?[^\s\p{L}\p{N}]+[\r\n]*' (f is never 0 in range)
      pos += (c == ' ');
      while (!(s.Flags(pos) & kWsLetterNumber) && s.Flags(pos) != 0) ++pos;
      while (IsNewline(s.Cp(pos))) ++pos;
      s.Emit(pos);
      continue;
    }
    pos = WhitespaceRun(s, pos, /*newline_alternative=*/true);
  }
}

// Kimi-K2: [\p{Han}]+ | letter words without Han plus optional contraction (two variants) |
// \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
void SplitKimiK2(const std::vector<uint32_t>& cps, size_t begin, size_t end,
                 std::vector<size_t>* lens) {
  Scanner s(cps, begin, end, lens);
  auto plain_letter = [&](size_t p) { return (s.Flags(p) & kCpLetter) && !IsHan(s.Cp(p)); };
  size_t pos = begin;
  while (pos < end) {
    const uint32_t c = s.Cp(pos);
    const uint16_t f = s.Flags(pos);
    if (IsHan(c)) {
      while (IsHan(s.Cp(pos))) ++pos;
      s.Emit(pos);
      continue;
    }
    const bool can_lead = !(IsNewline(c) || (f & (kCpLetter | kCpNumber)));
    if (plain_letter(pos) || (can_lead && plain_letter(pos + 1))) {
      const bool has_lead = can_lead;
      if (has_lead) ++pos;
      bool has_letters = false;
      while (plain_letter(pos)) {
        has_letters = true;
        ++pos;
      }
      if (has_letters || (!has_lead && plain_letter(pos))) {
        if (!has_letters) ++pos;
        while (plain_letter(pos)) ++pos;
        pos += Contraction(s, pos, /*ignore_case=*/true);
        s.Emit(pos);
        continue;
      }
      if (has_lead) --pos;
    }
    if (f & kCpNumber) {
      pos = NumberGroups(s, pos);
      continue;
    }
    const uint16_t f2 = (c == ' ') ? s.Flags(pos + 1) : f;
    if (!(f2 & kWsLetterNumber) && f2 != 0) {
      pos += (c == ' ');
      while (!(s.Flags(pos) & kWsLetterNumber) && s.Flags(pos) != 0) ++pos;
      while (IsNewline(s.Cp(pos))) ++pos;
      s.Emit(pos);
      continue;
    }
    pos = WhitespaceRun(s, pos, /*newline_alternative=*/true);
  }
}

// AFMoE digits: a run of n numbers is cut as (n % 3 leading digits) + groups of three; text
// before a run stays attached to the run's first group, as in llama.cpp.
void SplitAfmoeDigits(const std::vector<uint32_t>& cps, size_t begin, size_t end,
                      std::vector<size_t>* lens) {
  Scanner s(cps, begin, end, lens);
  size_t pos = begin;
  while (pos < end) {
    if (!(s.Flags(pos) & kCpNumber)) {
      ++pos;
      continue;
    }
    const size_t run_start = pos;
    while (pos < end && (s.Flags(pos) & kCpNumber)) ++pos;
    size_t cut = run_start + (pos - run_start) % 3;
    if (cut > run_start) s.Emit(cut);
    for (; cut < pos; cut += 3) s.Emit(cut + 3);
  }
  s.Emit(end);
}

}  // namespace shoal::tok
