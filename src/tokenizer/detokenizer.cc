// StreamingDetokenizer: Decode one token at a time, holding back bytes that a later token could
// still change (an incomplete UTF-8 character, or text near a space/apostrophe that the
// clean-up-spaces passes might rewrite).
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace shoal {
namespace {

// CleanSpaces only looks at spaces and apostrophes and at most 3 characters around them, so
// text that ends in 3 other bytes cleans the same whatever follows it.
bool Neutral(char c) { return c != ' ' && c != '\''; }

}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool special,
                                           bool replace_invalid)
    : tokenizer_(tokenizer), special_(special), replace_invalid_(replace_invalid) {}

std::string StreamingDetokenizer::Push(int32_t id) {
  std::string piece = tokenizer_.TokenToPiece(id, special_);
  if (first_) {
    first_ = false;
    if (tokenizer_.vocab().add_space_prefix && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
  }
  pending_ += piece;
  size_t cut = tok::CompleteUtf8Prefix(pending_);
  const bool clean = tokenizer_.vocab().clean_spaces;
  if (clean) {
    auto ok = [&](size_t c) {
      const bool at_char_start = c == pending_.size() || (pending_[c] & 0xC0) != 0x80;
      return c >= 3 && at_char_start && Neutral(pending_[c - 1]) && Neutral(pending_[c - 2]) &&
             Neutral(pending_[c - 3]);
    };
    while (cut > 0 && !ok(cut)) --cut;
  }
  if (cut == 0) return "";
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  if (clean) tok::CleanSpaces(&out);
  return Emit(out);
}

std::string StreamingDetokenizer::Flush() {
  std::string out;
  out.swap(pending_);
  if (tokenizer_.vocab().clean_spaces) tok::CleanSpaces(&out);
  return Emit(out);
}

std::string StreamingDetokenizer::Emit(std::string_view s) const {
  return replace_invalid_ ? tok::SanitizeUtf8(s) : std::string(s);
}

}  // namespace shoal
