// Byte-level BPE pre-tokenizer settings per `tokenizer.ggml.pre` name, as llama.cpp defines them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace shoal::tok {

struct PreTokenizerConfig {
  std::string name;                  // the pre-tokenizer name that selected this entry
  std::vector<std::string> regexes;  // applied in order (see RegexSplitter)
  bool byte_encode = true;           // GPT-2 byte mapping; false: raw UTF-8 with <0xXX> bytes
  bool escape_whitespaces = false;   // spaces become U+2581 before splitting (Gemma-4 style)
  bool clean_spaces = true;          // clean_up_tokenization_spaces in Decode
  bool ignore_merges = false;        // a word that is a token is emitted whole
  bool add_bos = false;              // default for tokenizer.ggml.add_bos_token
  bool add_sep = false;              // default for tokenizer.ggml.add_sep_token
  bool no_bos = false;               // the BOS id defaults to none (ChatGLM)
  bool lowercase = true;             // normalizer default (the "whitespace" model clears it)
};

// The settings for `pre` ("" and "default" give llama.cpp's default regexes). Unknown names are
// an error, as in llama.cpp.
Result<PreTokenizerConfig> LookupPreTokenizer(std::string_view pre);

}  // namespace shoal::tok
