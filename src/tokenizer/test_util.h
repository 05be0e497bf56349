// Helpers shared by the tokenizer tests.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/unicode.h"

namespace shoal::tok {

inline std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// True if one of the cut positions of `chunks` (between consecutive chunks) falls strictly
// inside a valid multi-byte UTF-8 character of their concatenation.
inline bool SplitsCharacter(const std::vector<std::string>& chunks) {
  std::string s;
  std::vector<size_t> cuts;
  for (const std::string& c : chunks) {
    s += c;
    cuts.push_back(s.size());
  }
  std::vector<bool> inside(s.size() + 1, false);
  for (size_t i = 0; i < s.size();) {
    const size_t len = Utf8SeqLen(s[i]);
    const bool valid =
        len > 1 && i + len <= s.size() && SanitizeUtf8(s.substr(i, len)) == s.substr(i, len);
    if (!valid) {
      ++i;
      continue;
    }
    for (size_t k = i + 1; k < i + len; ++k) inside[k] = true;
    i += len;
  }
  for (size_t c : cuts) {
    if (inside[c]) return true;
  }
  return false;
}

}  // namespace shoal::tok
