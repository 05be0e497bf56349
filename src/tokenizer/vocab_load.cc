// Loading a Vocab from GGUF tokenizer.ggml.* metadata with llama.cpp's defaults and fix-ups
// (llama_vocab::impl::load): special ids, add_bos/add_eos, EOG detection, special-token cache.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace shoal::tok {
namespace {

constexpr char kTokens[] = "tokenizer.ggml.tokens";
constexpr char kScores[] = "tokenizer.ggml.scores";
constexpr char kTokenType[] = "tokenizer.ggml.token_type";
constexpr char kMerges[] = "tokenizer.ggml.merges";

// GGUF token types (tokenizer.ggml.token_type) -> attributes.
uint32_t AttrFromType(int64_t type) {
  switch (type) {
    case 1:
      return kAttrNormal;
    case 2:
      return kAttrUnknown;
    case 3:
      return kAttrControl;
    case 4:
      return kAttrUserDefined;
    case 5:
      return kAttrUnused;
    case 6:
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

bool IsOneOf(std::string_view s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// Token texts llama.cpp auto-detects as special ids when the metadata does not name them.
const std::initializer_list<std::string_view> kEotTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
const std::initializer_list<std::string_view> kFimPreTexts = {"<|fim_prefix|>",
                                                              "<fim-prefix>",
                                                              "<fim_prefix>",
                                                              "<\xEF\xBD\x9C"
                                                              "fim\xE2\x96\x81"
                                                              "begin\xEF\xBD\x9C>",
                                                              "<PRE>",
                                                              "\xE2\x96\x81<PRE>",
                                                              "<|code_prefix|>",
                                                              "<|prefix|>"};
const std::initializer_list<std::string_view> kFimSufTexts = {"<|fim_suffix|>",
                                                              "<fim-suffix>",
                                                              "<fim_suffix>",
                                                              "<\xEF\xBD\x9C"
                                                              "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                                                              "<SUF>",
                                                              "\xE2\x96\x81<SUF>",
                                                              "<|code_suffix|>",
                                                              "<|suffix|>"};
const std::initializer_list<std::string_view> kFimMidTexts = {"<|fim_middle|>",
                                                              "<fim-middle>",
                                                              "<fim_middle>",
                                                              "<\xEF\xBD\x9C"
                                                              "fim\xE2\x96\x81"
                                                              "end\xEF\xBD\x9C>",
                                                              "<MID>",
                                                              "\xE2\x96\x81<MID>",
                                                              "<|code_middle|>",
                                                              "<|middle|>"};
const std::initializer_list<std::string_view> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>",
                                                              "<fim_pad>", "<PAD>", "[PAD]"};
const std::initializer_list<std::string_view> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>",
                                                              "<fim-repo>", "<REPO>", "<reponame>"};
// Texts that end generation.
const std::initializer_list<std::string_view> kEogTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "[e~["};

// Reads an optional token id key: absent, negative or out of range keeps `*id`.
void ReadId(const gguf::File& f, const char* key, int32_t n_vocab, int32_t* id) {
  if (*id >= n_vocab) *id = -1;  // a default outside the vocabulary is disabled
  const gguf::Value* v = f.Find(key);
  if (v == nullptr || !v->IsInteger()) return;
  const int64_t x = v->AsInt();
  if (x >= 0 && x < n_vocab) *id = static_cast<int32_t>(x);
}

void ReadBool(const gguf::File& f, const char* key, bool* b) {
  const gguf::Value* v = f.Find(key);
  if (v != nullptr && v->type == gguf::ValueType::kBool) *b = v->b;
}

Status ReadTokens(const gguf::File& f, Vocab* v) {
  SHOAL_ASSIGN_OR_RETURN(std::vector<std::string> texts, f.GetStringArray(kTokens));
  const size_t n = texts.size();
  std::vector<double> scores, types;
  if (f.Find(kScores) != nullptr) {
    SHOAL_ASSIGN_OR_RETURN(scores, f.GetNumberArray(kScores));
    if (scores.size() < n) return Errorf("{}: {} scores for {} tokens", kScores, scores.size(), n);
  }
  if (f.Find(kTokenType) != nullptr) {
    SHOAL_ASSIGN_OR_RETURN(types, f.GetNumberArray(kTokenType));
    if (types.size() < n) return Errorf("{}: {} types for {} tokens", kTokenType, types.size(), n);
  }
  v->tokens.resize(n);
  v->token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = v->tokens[i];
    t.text = texts[i].empty() ? fmt::format("[EMPTY_{}]", i) : std::move(texts[i]);
    auto [it, inserted] = v->token_to_id.emplace(t.text, static_cast<int32_t>(i));
    if (!inserted) {
      return Errorf("duplicate token in vocabulary: '{}' has ids {} and {}", t.text, it->second, i);
    }
    v->max_token_len = std::max(v->max_token_len, t.text.size());
    t.score = scores.empty() ? 0.0f : static_cast<float>(scores[i]);
    t.attr = types.empty() ? kAttrNormal : AttrFromType(static_cast<int64_t>(types[i]));
  }
  return Status::Ok();
}

Status ReadMerges(const gguf::File& f, Vocab* v) {
  SHOAL_ASSIGN_OR_RETURN(std::vector<std::string> merges, f.GetStringArray(kMerges));
  v->bpe_ranks.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t space = m.find(' ', 1);
    StringPair key;
    if (space != std::string::npos) key = {m.substr(0, space), m.substr(space + 1)};
    v->bpe_ranks.emplace(std::move(key), static_cast<int32_t>(i));
  }
  return Status::Ok();
}

// Auto-detection, EOG list and attribute fix-ups that llama.cpp applies after loading.
void DetectSpecialTokens(Vocab* v) {
  auto mark_control = [&](int32_t id) { v->tokens[id].attr |= kAttrControl; };
  struct Detect {
    int32_t* id;
    const std::initializer_list<std::string_view>* texts;
  };
  const Detect detects[] = {{&v->eot, &kEotTexts},        {&v->fim_pre, &kFimPreTexts},
                            {&v->fim_suf, &kFimSufTexts}, {&v->fim_mid, &kFimMidTexts},
                            {&v->fim_pad, &kFimPadTexts}, {&v->fim_rep, &kFimRepTexts}};
  for (int32_t id = 0; id < v->n(); ++id) {
    const std::string& text = v->tokens[id].text;
    for (const Detect& d : detects) {
      if (*d.id == -1 && IsOneOf(text, *d.texts)) {
        *d.id = id;
        mark_control(id);
      }
    }
    if (v->eom == -1 && text == "<|eom_id|>") {
      v->eom = id;
      mark_control(id);
    }
    if (v->fim_sep == -1 && text == "<|file_sep|>") {
      v->fim_sep = id;
      mark_control(id);
    }
  }
  for (TokenData& t : v->tokens) {
    if ((t.attr & kAttrControl) && t.text.find("unused") != std::string::npos) {
      t.attr |= kAttrUnused;
    }
  }
  std::vector<int32_t> eog;
  for (int32_t id : {v->fim_pad, v->fim_rep, v->fim_sep}) {
    if (id != -1) eog.push_back(id);
  }
  for (int32_t id = 0; id < v->n(); ++id) {
    TokenData& t = v->tokens[id];
    if (IsOneOf(t.text, kEogTexts)) {
      eog.push_back(id);
      t.attr |= kAttrControl;
    }
    if (IsOneOf(t.text, {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})) {
      t.attr = kAttrUserDefined;  // gpt-oss: always rendered
    }
  }
  for (int32_t id : {v->eos, v->eot, v->eom}) {
    if (id != -1) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  auto find_eog = [&](std::string_view text) -> int32_t {
    for (int32_t id : eog) {
      if (v->tokens[id].text == text) return id;
    }
    return -1;
  };
  // o200k_harmony / solar-open: <|end|> is not an end of generation there.
  const bool has_call = find_eog("<|call|>") != -1 || find_eog("<|calls|>") != -1;
  const int32_t end_id = find_eog("<|end|>");
  if (end_id != -1 && has_call && (find_eog("<|return|>") != -1 || find_eog("<|flush|>") != -1)) {
    eog.erase(std::find(eog.begin(), eog.end(), end_id));
    v->tokens[end_id].attr = kAttrUserDefined;
  }
  // gemma4 / paddleocr: </s> is not an end of generation when <|tool_response> is.
  const int32_t s_id = find_eog("</s>");
  if (s_id != -1 && find_eog("<|tool_response>") != -1) {
    eog.erase(std::find(eog.begin(), eog.end(), s_id));
    v->tokens[s_id].attr = kAttrNormal;
  }
  v->eog = eog;
  v->is_eog.assign(v->tokens.size(), 0);
  for (int32_t id : eog) v->is_eog[id] = 1;
}

// Per-model attribute tweaks keyed on names (llama.cpp: "Handle per token attributes").
void ApplyNameRules(const gguf::File& f, Vocab* v) {
  std::string name = f.GetStringOr("general.name", "");
  std::transform(name.begin(), name.end(), name.begin(),
                 [](char c) { return static_cast<char>(std::tolower(static_cast<uint8_t>(c))); });
  const std::string arch = f.GetStringOr("general.architecture", "");
  auto contains = [](const std::string& s, std::initializer_list<std::string_view> subs) {
    for (std::string_view sub : subs) {
      if (s.find(sub) != std::string::npos) return true;
    }
    return false;
  };
  auto set = [&](std::string_view text, uint32_t attr, bool on) {
    const int32_t id = v->TextToToken(text);
    if (id < 0) return;
    v->tokens[id].attr = on ? (v->tokens[id].attr | attr) : (v->tokens[id].attr & ~attr);
  };
  if (contains(v->pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
    set("<mask>", kAttrLstrip, true);
  } else if (contains(name, {"phi-3", "phi3"})) {
    for (int32_t id : v->special_tokens) v->tokens[id].attr |= kAttrRstrip;
    set("</s>", kAttrRstrip, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, kAttrRstrip, false);
  } else if (contains(name, {"modern-bert"})) {
    set("[MASK]", kAttrLstrip, true);
  }
}

}  // namespace

Result<std::unique_ptr<Vocab>> LoadVocab(const gguf::File& f) {
  auto v = std::make_unique<Vocab>();
  SHOAL_ASSIGN_OR_RETURN(v->model, f.GetString("tokenizer.ggml.model"));
  v->pre = f.GetStringOr("tokenizer.ggml.pre", "");
  std::string pre_name = v->pre;
  if (v->model == "llama") {
    v->type = TokenizerType::kSpm;
    v->bos = 1, v->eos = 2, v->unk = 0;
    v->add_space_prefix = true, v->add_bos = true, v->clean_spaces = false;
  } else if (v->model == "bert") {
    v->type = TokenizerType::kWpm;
    v->bos = 101, v->unk = 100, v->sep = 102, v->pad = 0, v->mask = 103;
    v->add_bos = true, v->add_sep = true, v->clean_spaces = true;
  } else if (v->model == "gpt2" || v->model == "whitespace" || v->model == "gemma4") {
    v->type = TokenizerType::kBpe;
    if (v->model == "gemma4") {
      pre_name = "gemma4";
    } else {
      v->bos = 11, v->eos = 11;
    }
    SHOAL_ASSIGN_OR_RETURN(v->pre_config, LookupPreTokenizer(pre_name));
    const PreTokenizerConfig& c = v->pre_config;
    v->clean_spaces = c.clean_spaces;
    v->ignore_merges = c.ignore_merges;
    v->add_bos = c.add_bos;
    v->add_sep = c.add_sep;
    v->escape_whitespaces = c.escape_whitespaces;
    v->byte_encode = c.byte_encode;
    v->lowercase = c.lowercase;
    if (c.no_bos) v->bos = -1;
    if (v->pre != "kimi-k2" || f.Find(kMerges) != nullptr) {
      SHOAL_RETURN_IF_ERROR(ReadMerges(f, v.get()).Annotate(f.path()));
    }
    SHOAL_ASSIGN_OR_RETURN(v->splitter, RegexSplitter::Create(c.regexes));
  } else {
    return Errorf("{}: unsupported tokenizer model '{}'", f.path(), v->model);
  }
  if (v->type != TokenizerType::kBpe) v->escape_whitespaces = true;  // llama.cpp's default
  ReadBool(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);
  SHOAL_RETURN_IF_ERROR(ReadTokens(f, v.get()).Annotate(f.path()));

  const int32_t n = v->n();
  const std::pair<const char*, int32_t*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &v->bos},
      {"tokenizer.ggml.eos_token_id", &v->eos},
      {"tokenizer.ggml.eot_token_id", &v->eot},
      {"tokenizer.ggml.eom_token_id", &v->eom},
      {"tokenizer.ggml.unknown_token_id", &v->unk},
      {"tokenizer.ggml.seperator_token_id", &v->sep},
      {"tokenizer.ggml.padding_token_id", &v->pad},
      {"tokenizer.ggml.mask_token_id", &v->mask},
      {"tokenizer.ggml.fim_pre_token_id", &v->fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &v->fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &v->fim_mid},
      {"tokenizer.ggml.fim_pad_token_id", &v->fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &v->fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &v->fim_sep},
      {"tokenizer.ggml.prefix_token_id", &v->fim_pre},
      {"tokenizer.ggml.suffix_token_id", &v->fim_suf},
      {"tokenizer.ggml.middle_token_id", &v->fim_mid},
  };
  for (const auto& [key, id] : ids) ReadId(f, key, n, id);
  ReadBool(f, "tokenizer.ggml.add_bos_token", &v->add_bos);
  ReadBool(f, "tokenizer.ggml.add_eos_token", &v->add_eos);
  ReadBool(f, "tokenizer.ggml.add_sep_token", &v->add_sep);
  if (pre_name == "gemma4" || pre_name == "granite-embed-multi-311m") v->add_bos = true;
  if (v->add_bos && v->bos == -1)
    return Errorf("{}: add_bos_token is true but no BOS id", f.path());
  if (v->add_eos && v->eos == -1)
    return Errorf("{}: add_eos_token is true but no EOS id", f.path());
  if (v->add_sep && v->sep == -1)
    return Errorf("{}: add_sep_token is true but no SEP id", f.path());
  v->lowercase = f.GetBoolOr("tokenizer.ggml.normalizer.lowercase", v->lowercase);
  v->strip_accents = f.GetBoolOr("tokenizer.ggml.normalizer.strip_accents", v->lowercase);

  DetectSpecialTokens(v.get());
  for (int32_t id = 0; id < n; ++id) {
    if (v->tokens[id].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      v->special_tokens.push_back(id);
    }
  }
  std::stable_sort(v->special_tokens.begin(), v->special_tokens.end(), [&](int32_t a, int32_t b) {
    return v->tokens[a].text.size() > v->tokens[b].text.size();
  });
  v->pieces.resize(n);
  for (int32_t id = 0; id < n; ++id) v->pieces[id] = v->ComputePiece(id);
  ApplyNameRules(f, v.get());
  return v;
}

int32_t Vocab::ByteToToken(uint8_t byte) const {
  char hex[8];
  std::snprintf(hex, sizeof(hex), "<0x%02X>", byte);
  int32_t id = TextToToken(hex);
  if (id < 0) id = TextToToken(std::string_view(reinterpret_cast<const char*>(&byte), 1));
  return id < 0 ? unk : id;
}

std::string Vocab::ComputePiece(int32_t id) const {
  const TokenData& t = tokens[id];
  if (t.attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return t.text;
  if (t.attr & kAttrNormal) {
    if (type != TokenizerType::kBpe || escape_whitespaces) {
      std::string out;  // U+2581 -> space
      for (size_t i = 0; i < t.text.size(); ++i) {
        if (t.text.compare(i, 3, "\xE2\x96\x81") == 0) {
          out += ' ';
          i += 2;
        } else {
          out += t.text[i];
        }
      }
      return out;
    }
    std::string out;  // byte-level BPE: each stand-in character back to its byte
    for (uint32_t cp : DecodeUtf8(t.text)) {
      const int b = UnicodeToByte(cp);
      if (b >= 0) {
        out += static_cast<char>(b);
        continue;
      }
      std::string utf8;
      AppendUtf8(cp, &utf8);
      out += "[UNK_BYTE_0x";
      for (char c : utf8) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
      out += t.text + "]";
    }
    return out;
  }
  if ((t.attr & kAttrByte) && t.text.size() >= 5) {
    return std::string(1, static_cast<char>(std::strtol(t.text.substr(3, 2).c_str(), nullptr, 16)));
  }
  return "";
}

}  // namespace shoal::tok
