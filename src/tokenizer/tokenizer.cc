// Tokenizer: special-token partitioning, per-model encode dispatch, pieces and Decode, following
// llama.cpp's llama_vocab::impl::tokenize / token_to_piece / detokenize.
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/vocab.h"

namespace shoal {
namespace {

using tok::kAttrControl;
using tok::kAttrLstrip;
using tok::kAttrRstrip;
using tok::kAttrUnknown;
using tok::Vocab;

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// A piece of the input: a token already decided, or raw text [offset, offset + length).
struct Fragment {
  int32_t token;  // -1 for raw text
  size_t offset;
  size_t length;
};

// tokenizer_st_partition: for each special token, longest text first, split every raw fragment
// at each occurrence. Control and unknown-type tokens only take part with `parse_special`.
std::vector<Fragment> Partition(const Vocab& v, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : v.special_tokens) {
    const tok::TokenData& t = v.tokens[id];
    if (!parse_special && (t.attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string_view needle = t.text;
    if (text.find(needle) == std::string_view::npos) continue;  // cheap pre-check
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t base = f.offset, len = f.length;
      while (len > 0) {
        const size_t rel = text.substr(base, len).find(needle);
        if (rel == std::string_view::npos) {
          next.push_back({-1, base, len});
          break;
        }
        size_t left = rel;
        if (t.attr & kAttrLstrip) {
          while (left > 0 && IsAsciiSpace(text[base + left - 1])) --left;
        }
        if (left > 0) next.push_back({-1, base, left});
        next.push_back({id, 0, 0});
        size_t right = base + rel + needle.size();
        size_t right_len = base + len - right;
        if (t.attr & kAttrRstrip) {
          while (right_len > 0 && IsAsciiSpace(text[right])) ++right, --right_len;
        }
        base = right;
        len = right_len;
      }
    }
    frags.swap(next);
  }
  return frags;
}

std::string ReplaceSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      out += "\xE2\x96\x81";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<tok::Vocab> vocab) : vocab_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::File& f) {
  SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<tok::Vocab> vocab, tok::LoadVocab(f));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(vocab)));
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const Vocab& v = *vocab_;
  const std::vector<Fragment> frags = Partition(v, text, parse_special);
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  switch (v.type) {
    case TokenizerType::kSpm: {
      if (add_special && v.add_bos) out.push_back(v.bos);
      bool prev_special = true;  // the text starts with a space prefix
      for (const Fragment& f : frags) {
        if (f.token >= 0) {
          out.push_back(f.token);
          prev_special = true;
          continue;
        }
        std::string raw = (v.add_space_prefix && prev_special) ? " " : "";
        raw += text.substr(f.offset, f.length);
        v.EncodeSpm(ReplaceSpaces(raw), &out);
        prev_special = false;
      }
      if (add_special && v.add_eos) out.push_back(v.eos);
      break;
    }
    case TokenizerType::kBpe: {
      if (add_special && v.add_bos) out.push_back(v.bos);
      for (const Fragment& f : frags) {
        if (f.token >= 0) {
          out.push_back(f.token);
          continue;
        }
        const std::string_view raw = text.substr(f.offset, f.length);
        if (v.escape_whitespaces) {
          v.EncodeBpe(ReplaceSpaces(raw), &out);
        } else {
          v.EncodeBpe(raw, &out);
        }
      }
      if (add_special && v.add_eos) out.push_back(v.eos);
      break;
    }
    case TokenizerType::kWpm: {
      if (add_special && v.bos >= 0) out.push_back(v.bos);
      for (const Fragment& f : frags) {
        if (f.token >= 0) {
          out.push_back(f.token);
        } else {
          v.EncodeWpm(text.substr(f.offset, f.length), &out);
        }
      }
      if (add_special && v.sep >= 0) out.push_back(v.sep);
      break;
    }
  }
  return out;
}

std::string Tokenizer::TokenToPiece(int32_t id, bool special) const {
  const Vocab& v = *vocab_;
  if (!v.Valid(id)) return "";
  if (!special && (v.tokens[id].attr & (kAttrUnknown | kAttrControl))) return "";
  return v.pieces[id];
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids, bool special) const {
  std::string text;
  bool remove_space = vocab_->add_space_prefix;
  for (int32_t id : ids) {
    std::string piece = TokenToPiece(id, special);
    size_t skip = (remove_space && !piece.empty() && piece[0] == ' ') ? 1 : 0;
    text.append(piece, skip, std::string::npos);
    remove_space = false;
  }
  if (vocab_->clean_spaces) tok::CleanSpaces(&text);
  return text;
}

TokenizerType Tokenizer::type() const { return vocab_->type; }
int32_t Tokenizer::n_vocab() const { return vocab_->n(); }
const std::string& Tokenizer::Token(int32_t id) const {
  static const std::string kEmpty;
  return vocab_->Valid(id) ? vocab_->tokens[id].text : kEmpty;
}
int32_t Tokenizer::FindToken(std::string_view text) const { return vocab_->TextToToken(text); }
float Tokenizer::Score(int32_t id) const {
  return vocab_->Valid(id) ? vocab_->tokens[id].score : 0.0f;
}
bool Tokenizer::IsControl(int32_t id) const { return vocab_->Attr(id) & kAttrControl; }
int32_t Tokenizer::bos() const { return vocab_->bos; }
int32_t Tokenizer::eos() const { return vocab_->eos; }
int32_t Tokenizer::eot() const { return vocab_->eot; }
int32_t Tokenizer::unk() const { return vocab_->unk; }
int32_t Tokenizer::pad() const { return vocab_->pad; }
bool Tokenizer::add_bos() const { return vocab_->add_bos; }
bool Tokenizer::add_eos() const { return vocab_->add_eos; }
bool Tokenizer::IsEog(int32_t id) const { return vocab_->Valid(id) && vocab_->is_eog[id]; }
const std::vector<int32_t>& Tokenizer::EogTokens() const { return vocab_->eog; }

namespace tok {

// llama.cpp's three clean-up passes: drop the space before ?!., ; drop the spaces around a lone
// apostrophe; drop the space before 's 'm 're 've.
void CleanSpaces(std::string* text) {
  std::string& t = *text;
  const size_t n1 = t.size();
  size_t total = n1 ? 1 : 0;
  for (size_t i = 1; i < n1; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    t[total++] = x;
  }
  const size_t n2 = total;
  total = n2 ? 1 : 0;
  for (size_t i = 1; i < n2; ++i) {
    const char x = t[i];
    if (x == '\'' && i + 1 < n2 && t[i - 1] == ' ' && t[i + 1] == ' ') {
      --total;
      t[++i] = '\0';
    }
    t[total++] = x;
  }
  const size_t n3 = total;
  total = n3 ? 1 : 0;
  for (size_t i = 1; i < n3; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
      const char x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < n3) {
        const char x2 = t[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    t[total++] = x;
  }
  t.resize(total);
}

}  // namespace tok
}  // namespace shoal
