// Tokenizer: text <-> token ids exactly as llama.cpp does it, from a GGUF's tokenizer.ggml.*
// metadata. Supports SentencePiece-style (SPM, "llama"), byte-level BPE ("gpt2", with every
// pre-tokenizer llama.cpp lists, and "gemma4"/"whitespace") and WordPiece ("bert") vocabularies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"

namespace shoal {

namespace tok {
struct Vocab;
}  // namespace tok

enum class TokenizerType { kSpm, kBpe, kWpm };

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* from `f`. Errors (missing/invalid keys, unknown tokenizer model or
  // pre-tokenizer) name the key and the file.
  static Result<std::unique_ptr<Tokenizer>> FromGguf(const gguf::File& f);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // llama_tokenize: `add_special` adds BOS/EOS as the vocabulary asks (CLS/SEP for WordPiece);
  // with `parse_special`, control and unknown-type token strings in the text become those tokens
  // (user-defined tokens always do).
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;

  // llama_token_to_piece with lstrip 0: the bytes of one token (SPM's U+2581 as a space, byte
  // tokens as their raw byte). Control/unknown tokens give "" unless `special`.
  std::string TokenToPiece(int32_t id, bool special) const;

  // llama_detokenize(remove_special=false, unparse_special=special): pieces concatenated, the
  // first piece losing one leading space when the vocab adds a space prefix (SPM), then
  // clean_up_tokenization_spaces where the vocab asks for it. Raw bytes (may be invalid UTF-8).
  std::string Decode(const std::vector<int32_t>& ids, bool special) const;

  TokenizerType type() const;
  int32_t n_vocab() const;
  const std::string& Token(int32_t id) const;      // the vocabulary string; "" if out of range
  int32_t FindToken(std::string_view text) const;  // exact vocabulary string -> id, -1 if absent
  float Score(int32_t id) const;
  bool IsControl(int32_t id) const;  // control-type token (BOS, EOS, <|im_end|>, ...)

  int32_t bos() const;  // -1 when the vocabulary has none
  int32_t eos() const;
  int32_t eot() const;
  int32_t unk() const;
  int32_t pad() const;
  bool add_bos() const;
  bool add_eos() const;
  // End of generation: EOS, EOT, EOM and the control tokens llama.cpp treats as such
  // (<|im_end|>, <|eot_id|>, <end_of_turn>, <|endoftext|>, ...).
  bool IsEog(int32_t id) const;
  const std::vector<int32_t>& EogTokens() const;  // sorted

  // Internal state, for the streaming detokenizer.
  const tok::Vocab& vocab() const { return *vocab_; }

 private:
  explicit Tokenizer(std::unique_ptr<tok::Vocab> vocab);
  std::unique_ptr<tok::Vocab> vocab_;
};

// Incremental Decode for streaming output: Push returns the text that became final with this
// token and never ends inside a UTF-8 character (an incomplete sequence waits for its remaining
// bytes). Flush returns whatever is held back. The concatenation of all Push results and Flush
// equals Decode(ids, special) byte for byte in the default mode; with `replace_invalid`, bytes
// that can never form a character are emitted as U+FFFD instead (output always valid UTF-8).
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool special = false,
                                bool replace_invalid = false);
  std::string Push(int32_t id);
  std::string Flush();

 private:
  std::string Emit(std::string_view s) const;
  const Tokenizer& tokenizer_;
  bool special_;
  bool replace_invalid_;
  bool first_ = true;
  std::string pending_;  // decoded bytes not yet returned
};

}  // namespace shoal
