// Unicode helpers for the tokenizers (see unicode.h). Codepoint categories are looked up lazily
// with PCRE2, so the tokenizer and its regexes agree on one Unicode database.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/unicode.h"

#include <pcre2.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>

namespace shoal::tok {
namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;
constexpr uint16_t kComputed = 0x8000;  // cache marker: flags of this codepoint are known

bool IsWhitespace(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

// One anchored PCRE2 pattern whose matching group tells the general category.
class CategoryMatcher {
 public:
  CategoryMatcher() {
    static const char kPattern[] =
        "(\\p{N})|(\\p{L})|(\\p{Z})|(\\p{M})|(\\p{P})|(\\p{S})|(\\p{Cc}|\\p{Cf}|\\p{Co})";
    int err = 0;
    PCRE2_SIZE err_off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_ANCHORED, &err, &err_off, nullptr);
  }
  ~CategoryMatcher() { pcre2_code_free(code_); }

  uint16_t Classify(uint32_t cp) const {
    if (code_ == nullptr) return kCpUndefined;
    std::string s;
    AppendUtf8(cp, &s);
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    int rc =
        pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, md, nullptr);
    uint16_t flags = kCpUndefined;
    if (rc > 1) {
      // rc - 1 is the highest group that matched; groups are in kPattern order.
      static constexpr uint16_t kByGroup[] = {0,       kCpNumber, kCpLetter, kCpSeparator,
                                              kCpMark, kCpPunct,  kCpSymbol, kCpControl};
      flags = kByGroup[rc - 1];
    }
    pcre2_match_data_free(md);
    return flags;
  }

 private:
  pcre2_code* code_ = nullptr;
};

// Zero-initialized at load time (constant initialization, no constructor runs): 2.2 MB.
std::atomic<uint16_t> g_flag_cache[kMaxCodepoint + 1];

}  // namespace

uint16_t CodepointFlags(uint32_t cp) {
  if (cp > kMaxCodepoint) return kCpUndefined;
  std::atomic<uint16_t>& slot = g_flag_cache[cp];
  uint16_t v = slot.load(std::memory_order_relaxed);
  if (v & kComputed) return v & ~kComputed;
  static const CategoryMatcher matcher;
  uint16_t flags = (cp >= 0xD800 && cp <= 0xDFFF) ? uint16_t{kCpControl} : matcher.Classify(cp);
  if (IsWhitespace(cp)) flags |= kCpWhitespace;
  slot.store(flags | kComputed, std::memory_order_relaxed);
  return flags;
}

std::vector<uint32_t> DecodeUtf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const size_t n = s.size();
  auto cont = [&](size_t i) { return i < n && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < n) {
    const uint8_t b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && cont(i + 1)) {
      out.push_back(((b0 & 0x1Fu) << 6) | (s[i + 1] & 0x3F));
      i += 2;
    } else if ((b0 & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
      out.push_back(((b0 & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3F));
      i += 3;
    } else if ((b0 & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      out.push_back(((b0 & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) |
                    (s[i + 3] & 0x3F));
      i += 4;
    } else {
      out.push_back(0xFFFD);  // invalid byte: replaced, one byte consumed (as llama.cpp)
      i += 1;
    }
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp > kMaxCodepoint) cp = 0xFFFD;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Bytes that GPT-2 maps to themselves: '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF. The other 68
// bytes map, in increasing byte order, to U+0100, U+0101, ...
bool IsPrintableByte(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteTables {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 256 + 68> from_unicode;  // indexed by codepoint
  ByteTables() {
    from_unicode.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = IsPrintableByte(b) ? b : 256 + n++;
      AppendUtf8(cp, &to_unicode[b]);
      from_unicode[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Bytes() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

const std::string& ByteToUnicode(uint8_t byte) { return Bytes().to_unicode[byte]; }

int UnicodeToByte(uint32_t cp) {
  return cp < Bytes().from_unicode.size() ? Bytes().from_unicode[cp] : -1;
}

uint32_t ToLower(uint32_t cp) {
  const LowercaseRange* end = kLowercaseRanges + kLowercaseRangesSize;
  const LowercaseRange* it = std::upper_bound(
      kLowercaseRanges, end, cp, [](uint32_t v, const LowercaseRange& r) { return v < r.first; });
  if (it == kLowercaseRanges) return cp;
  --it;
  if (cp > it->last || (cp - it->first) % static_cast<uint32_t>(it->step) != 0) return cp;
  return static_cast<uint32_t>(static_cast<int64_t>(cp) + it->delta);
}

uint32_t NfdFirst(uint32_t cp) {
  const NfdRange* end = kNfdRanges + kNfdRangesSize;
  const NfdRange* it = std::upper_bound(kNfdRanges, end, cp,
                                        [](uint32_t v, const NfdRange& r) { return v < r.first; });
  if (it == kNfdRanges) return cp;
  --it;
  return cp <= it->last ? it->base : cp;
}

size_t CompleteUtf8Prefix(std::string_view s) {
  const size_t n = s.size();
  // Find the last non-continuation byte among the final 4 bytes.
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;
    size_t need = 1;
    if ((b & 0xE0) == 0xC0)
      need = 2;
    else if ((b & 0xF0) == 0xE0)
      need = 3;
    else if ((b & 0xF8) == 0xF0)
      need = 4;
    return need > back ? n - back : n;
  }
  return n;
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  const size_t n = s.size();
  auto byte = [&](size_t k) { return k < n ? static_cast<uint8_t>(s[k]) : 0; };
  auto cont = [&](size_t k) { return k < n && (byte(k) & 0xC0) == 0x80; };
  while (i < n) {
    const uint8_t b0 = byte(i);
    size_t len = 0;
    uint32_t cp = 0;
    if (b0 < 0x80) {
      len = 1;
    } else if ((b0 & 0xE0) == 0xC0 && cont(i + 1)) {
      len = 2;
      cp = ((b0 & 0x1Fu) << 6) | (byte(i + 1) & 0x3F);
      if (cp < 0x80) len = 0;  // overlong
    } else if ((b0 & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
      len = 3;
      cp = ((b0 & 0x0Fu) << 12) | ((byte(i + 1) & 0x3Fu) << 6) | (byte(i + 2) & 0x3F);
      if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) len = 0;
    } else if ((b0 & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      len = 4;
      cp = ((b0 & 0x07u) << 18) | ((byte(i + 1) & 0x3Fu) << 12) | ((byte(i + 2) & 0x3Fu) << 6) |
           (byte(i + 3) & 0x3F);
      if (cp < 0x10000 || cp > kMaxCodepoint) len = 0;
    }
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      i += 1;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace shoal::tok
