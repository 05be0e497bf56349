// Unicode helpers for the tokenizers: llama.cpp-compatible UTF-8 decoding, codepoint classes,
// the GPT-2 byte<->unicode mapping, lowercase and NFD first-codepoint lookups.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shoal::tok {

// Codepoint class bits (one general category bit plus kWhitespace). Categories come from PCRE2's
// Unicode tables; whitespace is the Unicode White_Space property (what Python's `regex` \s is).
enum CpFlag : uint16_t {
  kCpUndefined = 1 << 0,  // unassigned (Cn) or beyond U+10FFFF
  kCpNumber = 1 << 1,     // \p{N}
  kCpLetter = 1 << 2,     // \p{L}
  kCpSeparator = 1 << 3,  // \p{Z}
  kCpMark = 1 << 4,       // \p{M}
  kCpPunct = 1 << 5,      // \p{P}
  kCpSymbol = 1 << 6,     // \p{S}
  kCpControl = 1 << 7,    // \p{Cc}, \p{Cf}, \p{Co}, \p{Cs}
  kCpWhitespace = 1 << 8,
};
constexpr uint16_t kCpCategoryMask = 0xFF;

// Class bits of `cp` (thread-safe; computed once per codepoint and cached).
uint16_t CodepointFlags(uint32_t cp);

// Byte length of a UTF-8 sequence from its lead byte, as llama.cpp's unicode_len_utf8 (a
// continuation byte counts as 1).
inline size_t Utf8SeqLen(char lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(lead) >> 4];
}

// Decodes like llama.cpp's unicode_cpts_from_utf8: each invalid byte becomes U+FFFD.
std::vector<uint32_t> DecodeUtf8(std::string_view s);
// Appends the UTF-8 form of `cp` (values beyond U+10FFFF are written as U+FFFD).
void AppendUtf8(uint32_t cp, std::string* out);

// GPT-2 byte-level BPE mapping: byte -> UTF-8 of its printable stand-in codepoint, and back
// (returns -1 for a codepoint that stands for no byte).
const std::string& ByteToUnicode(uint8_t byte);
int UnicodeToByte(uint32_t cp);

// First codepoint of the lowercase form of `cp`, and first codepoint of its NFD form.
uint32_t ToLower(uint32_t cp);
uint32_t NfdFirst(uint32_t cp);

// Length of the longest prefix of `s` that does not end inside a UTF-8 sequence that more bytes
// could still complete (invalid bytes count as complete).
size_t CompleteUtf8Prefix(std::string_view s);
// Replaces every invalid or truncated UTF-8 sequence of `s` by U+FFFD.
std::string SanitizeUtf8(std::string_view s);

// Generated tables (unicode_tables.cc).
struct LowercaseRange {
  uint32_t first, last;
  int32_t step, delta;
};
struct NfdRange {
  uint32_t first, last, base;
};
extern const LowercaseRange kLowercaseRanges[];
extern const size_t kLowercaseRangesSize;
extern const NfdRange kNfdRanges[];
extern const size_t kNfdRangesSize;

}  // namespace shoal::tok
