// RegexSplitter: llama.cpp's unicode_regex_split on PCRE2. Regexes that use Unicode categories
// run, as in llama.cpp, on a "collapsed" text with one byte per codepoint (ASCII kept, other
// codepoints replaced by a byte standing for their category); the others run in UTF-8 mode on
// the text with non-ASCII whitespace replaced by \v. Both keep \s, \d, \w and \b ASCII-only, as
// std::regex does.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex_split.h"

#include <pcre2.h>

#include <utility>

#include "tokenizer/unicode.h"

namespace shoal::tok {

const char kGpt2Regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const char kLlama3Regex[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

namespace {

const char kLlama3RegexCaseInsensitive[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Collapsed bytes for codepoints >= 128 and what each category matches in the collapsed text.
constexpr char kCollapsedWhitespace = 0x0B;
constexpr char kCollapsedOther = static_cast<char>(0xD0);
struct Category {
  const char* name;  // as written in the regex
  uint16_t flag;
  char byte;          // stand-in byte for non-ASCII codepoints of this category
  const char* ascii;  // the ASCII members, as class content
};
const Category kCategories[] = {
    {"\\p{N}", kCpNumber, static_cast<char>(0xD1), "0-9"},
    {"\\p{L}", kCpLetter, static_cast<char>(0xD2), "A-Za-z"},
    {"\\p{P}", kCpPunct, static_cast<char>(0xD3), "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
    {"\\p{M}", kCpMark, static_cast<char>(0xD4), ""},
    {"\\p{S}", kCpSymbol, static_cast<char>(0xD5), "\\$\\+<->\\^`\\|"},
    {"\\p{Lu}", kCpLetter, static_cast<char>(0xD2), "A-Za-z"},
    {"\\p{Ll}", kCpLetter, static_cast<char>(0xD2), "A-Za-z"},
    {"\\p{Lt}", kCpLetter, static_cast<char>(0xD2), "A-Za-z"},
    {"\\p{Lm}", kCpLetter, static_cast<char>(0xD2), "A-Za-z"},
    {"\\p{Lo}", kCpLetter, static_cast<char>(0xD2), "A-Za-z"},
};

bool UsesCategory(const std::string& re) {
  for (const Category& c : kCategories) {
    if (re.find(c.name) != std::string::npos) return true;
  }
  return false;
}

// Rewrites \p{X} into a class over the collapsed alphabet (brackets added outside a class).
Result<std::string> CollapseRegex(const std::string& re) {
  for (char ch : re) {
    if (static_cast<uint8_t>(ch) >= 0x80) {
      return Errorf("regex mixes Unicode categories and non-ASCII characters: {}", re);
    }
  }
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const bool escaped = i > 0 && re[i - 1] == '\\';
    if (re[i] == '[' && !escaped) {
      in_class = true;
      out += '[';
      continue;
    }
    if (in_class && re[i] == ']' && !escaped) {
      in_class = false;
      out += ']';
      continue;
    }
    bool replaced = false;
    if (re.compare(i, 3, "\\p{") == 0) {
      for (const Category& c : kCategories) {
        const size_t n = std::char_traits<char>::length(c.name);
        if (re.compare(i, n, c.name) != 0) continue;
        out += in_class ? "" : "[";
        out += c.byte;
        out += c.ascii;
        out += in_class ? "" : "]";
        i += n - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += re[i];
  }
  return out;
}

char CollapsedByte(uint32_t cp) {
  if (cp < 0x80) return static_cast<char>(cp);
  const uint16_t flags = CodepointFlags(cp);
  if (flags & kCpWhitespace) return kCollapsedWhitespace;
  for (const Category& c : kCategories) {
    if ((flags & kCpCategoryMask) == c.flag) return c.byte;
  }
  return kCollapsedOther;
}

enum class Kind { kGpt2, kLlama3, kKimiK2, kAfmoeDigits, kCollapsed, kUtf8 };

}  // namespace

struct RegexSplitter::Expr {
  Kind kind = Kind::kCollapsed;
  pcre2_code* code = nullptr;
  std::string source;
};

RegexSplitter::~RegexSplitter() {
  for (Expr& e : exprs_) pcre2_code_free(e.code);
}

Result<std::unique_ptr<RegexSplitter>> RegexSplitter::Create(
    const std::vector<std::string>& regexes) {
  std::unique_ptr<RegexSplitter> s(new RegexSplitter());
  for (const std::string& re : regexes) {
    Expr e;
    e.source = re;
    std::string pattern = re;
    uint32_t options = PCRE2_DOLLAR_ENDONLY;
    if (re == kGpt2Regex) {
      e.kind = Kind::kGpt2;
    } else if (re == kLlama3Regex || re == kLlama3RegexCaseInsensitive) {
      e.kind = Kind::kLlama3;
    } else if (re == "\\p{Han}+") {
      e.kind = Kind::kKimiK2;
    } else if (re == "\\p{AFMoE_digits}") {
      e.kind = Kind::kAfmoeDigits;
    } else if (UsesCategory(re)) {
      e.kind = Kind::kCollapsed;
      SHOAL_ASSIGN_OR_RETURN(pattern, CollapseRegex(re));
      s->need_collapse_ = true;
    } else {
      e.kind = Kind::kUtf8;
      options |= PCRE2_UTF;
    }
    if (e.kind == Kind::kCollapsed || e.kind == Kind::kUtf8) {
      int err = 0;
      PCRE2_SIZE err_off = 0;
      e.code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                             &err, &err_off, nullptr);
      if (e.code == nullptr) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof(msg));
        return Errorf("pre-tokenizer regex '{}' rejected at offset {}: {}", re, err_off,
                      reinterpret_cast<const char*>(msg));
      }
      pcre2_jit_compile(e.code, PCRE2_JIT_COMPLETE);  // optional speed-up; falls back if absent
    }
    s->exprs_.push_back(std::move(e));
  }
  return s;
}

namespace {

// Runs `code` over subject[0, len) like std::regex_iterator and appends the lengths (in
// codepoints) of matches and of the gaps between them.
void RunRegex(pcre2_code* code, const char* subject, size_t len, bool utf8,
              std::vector<size_t>* lens) {
  auto cps_between = [&](size_t a, size_t b) {
    if (!utf8) return b - a;
    size_t n = 0;
    for (size_t i = a; i < b; ++i) n += (static_cast<uint8_t>(subject[i]) & 0xC0) != 0x80;
    return n;
  };
  auto next_char = [&](size_t p) {
    ++p;
    while (utf8 && p < len && (static_cast<uint8_t>(subject[p]) & 0xC0) == 0x80) ++p;
    return p;
  };
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject);
  size_t prev_end = 0;  // end of the last match (bytes)
  size_t start = 0;
  uint32_t retry = 0;  // options after an empty match: a non-empty match at the same place
  while (start <= len) {
    int rc = pcre2_match(code, s, len, start, retry, md, nullptr);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
      rc = pcre2_match(code, s, len, start, retry | PCRE2_NO_JIT, md, nullptr);
    }
    if (rc < 0) {
      if (retry == 0) break;  // no match (or a matcher error): the rest is one gap
      retry = 0;
      start = next_char(start);
      continue;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t ms = ov[0], me = ov[1];
    if (ms > prev_end) lens->push_back(cps_between(prev_end, ms));
    if (me > ms) lens->push_back(cps_between(ms, me));
    prev_end = me;
    if (me == ms) {
      if (me >= len) break;
      retry = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
    } else {
      retry = 0;
    }
    start = me;
  }
  if (prev_end < len) lens->push_back(cps_between(prev_end, len));
  pcre2_match_data_free(md);
}

}  // namespace

std::vector<size_t> RegexSplitter::SplitLengths(const std::vector<uint32_t>& cps) const {
  if (cps.empty()) return {};
  std::string collapsed;
  if (need_collapse_) {
    collapsed.resize(cps.size());
    for (size_t i = 0; i < cps.size(); ++i) collapsed[i] = CollapsedByte(cps[i]);
  }
  std::vector<size_t> offsets = {cps.size()};
  std::vector<size_t> next;
  std::string subject;
  for (const Expr& e : exprs_) {
    next.clear();
    size_t start = 0;
    for (size_t len : offsets) {
      const size_t end = start + len;
      switch (e.kind) {
        case Kind::kGpt2:
          SplitGpt2(cps, start, end, &next);
          break;
        case Kind::kLlama3:
          SplitLlama3(cps, start, end, &next);
          break;
        case Kind::kKimiK2:
          SplitKimiK2(cps, start, end, &next);
          break;
        case Kind::kAfmoeDigits:
          SplitAfmoeDigits(cps, start, end, &next);
          break;
        case Kind::kCollapsed:
          RunRegex(e.code, collapsed.data() + start, len, /*utf8=*/false, &next);
          break;
        case Kind::kUtf8:
          subject.clear();
          for (size_t i = start; i < end; ++i) {
            uint32_t cp = cps[i];
            if (cp >= 0x80 && (CodepointFlags(cp) & kCpWhitespace)) cp = 0x0B;
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // keep the subject valid UTF-8
            AppendUtf8(cp, &subject);
          }
          RunRegex(e.code, subject.data(), subject.size(), /*utf8=*/true, &next);
          break;
      }
      start = end;
    }
    offsets.swap(next);
  }
  return offsets;
}

std::vector<std::string> RegexSplitter::Split(std::string_view text, bool byte_encode) const {
  const std::vector<uint32_t> cps = DecodeUtf8(text);
  const std::vector<size_t> lens = SplitLengths(cps);
  std::vector<std::string> words;
  words.reserve(lens.size());
  std::string utf8;
  size_t pos = 0;
  for (size_t len : lens) {
    utf8.clear();
    for (size_t i = pos; i < pos + len; ++i) AppendUtf8(cps[i], &utf8);
    pos += len;
    if (!byte_encode) {
      words.push_back(utf8);
      continue;
    }
    std::string encoded;
    encoded.reserve(utf8.size() * 2);
    for (char ch : utf8) encoded += ByteToUnicode(static_cast<uint8_t>(ch));
    words.push_back(std::move(encoded));
  }
  return words;
}

}  // namespace shoal::tok
