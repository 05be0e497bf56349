// Pre-tokenizer word splitting for byte-level BPE, equal to llama.cpp's unicode_regex_split:
// each regex of a list refines the previous split (matches and the gaps between them both become
// words); four patterns have hand-written splitters, the rest run on PCRE2.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace shoal::tok {

// The GPT-2 and Llama-3 patterns, spelled exactly as llama.cpp spells them (they select the
// hand-written splitters, as in llama.cpp).
extern const char kGpt2Regex[];
extern const char kLlama3Regex[];

class RegexSplitter {
 public:
  // Compiles the list; errors name the regex PCRE2 rejected.
  static Result<std::unique_ptr<RegexSplitter>> Create(const std::vector<std::string>& regexes);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Splits `text` into words. Invalid UTF-8 bytes become U+FFFD first (as in llama.cpp). With
  // `byte_encode`, every byte of a word is then replaced by its GPT-2 stand-in character.
  std::vector<std::string> Split(std::string_view text, bool byte_encode) const;

  // The word lengths in codepoints for an already decoded text (exposed for tests).
  std::vector<size_t> SplitLengths(const std::vector<uint32_t>& cps) const;

 private:
  struct Expr;
  RegexSplitter() = default;
  std::vector<Expr> exprs_;
  bool need_collapse_ = false;
};

// Hand-written splitters. Each appends, for the codepoints cps[begin, end), the lengths of the
// words it finds (consecutive, covering the range).
void SplitGpt2(const std::vector<uint32_t>& cps, size_t begin, size_t end,
               std::vector<size_t>* lens);
void SplitLlama3(const std::vector<uint32_t>& cps, size_t begin, size_t end,
                 std::vector<size_t>* lens);
void SplitKimiK2(const std::vector<uint32_t>& cps, size_t begin, size_t end,
                 std::vector<size_t>* lens);
void SplitAfmoeDigits(const std::vector<uint32_t>& cps, size_t begin, size_t end,
                      std::vector<size_t>* lens);

}  // namespace shoal::tok
