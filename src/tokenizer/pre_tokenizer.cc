// The pre-tokenizer table: `tokenizer.ggml.pre` name -> regex list and flags, following
// llama.cpp's llama-vocab.cpp. Non-ASCII characters of llama.cpp's regexes are written as PCRE2
// \x{...} escapes (same codepoints).
#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/regex_split.h"

namespace shoal::tok {
namespace {

#define SHOAL_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

const char kQwen2[] = SHOAL_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
const char kDefaultPunct[] = "[\\p{P}\\$\\+<=>\\^~\\|]+";
const char kBloom[] =
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+";
const char kCjkKana[] = "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+";
const char kCjkHangul[] = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";
// Shared by deepseek-v3 style tokenizers (\r and \n are real characters here, as in llama.cpp).
const char kDeepseek3Words[] =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
const char kDeepseekLlmLetters[] =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"
    "\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}"
    "\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}"
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}"
    "\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}"
    "\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"
    "\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}"
    "\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}"
    "\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}"
    "\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+";
// Case-split words of the GPT-4o family; `M` is "" or "\\p{M}" (granite-embed adds marks).
#define SHOAL_CASE_WORDS(M, TAIL)                                                       \
  "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}" M "])([^a-z]))*((?=[\\p{L}" M "])([^A-Z]))+" TAIL \
  "|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}" M "])([^a-z]))+((?=[\\p{L}" M "])([^A-Z]))*" TAIL
#define SHOAL_GPT4O_REST \
  "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define SHOAL_CATEGORY_WORDS(TAIL)                                                                 \
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" TAIL \
  "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"      \
  "*" TAIL

std::vector<std::string> RegexesFor(std::string_view group) {
  using V = std::vector<std::string>;
  if (group == "llama3") return V{kLlama3Regex};
  if (group == "jais2") {
    return V{SHOAL_CONTRACTIONS
             "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
             "\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|"
             "\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"};
  }
  if (group == "deepseek-llm") {
    return V{"[\r\n]",
             kDeepseekLlmLetters,
             "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}"
             "\\x{3000}-\\x{3002}]+",
             "\\s+$",
             kCjkHangul,
             "\\p{N}+"};
  }
  if (group == "deepseek-v3") return V{"\\p{N}{1,3}", kCjkKana, kDeepseek3Words};
  if (group == "spark2_5") {
    return V{"\\p{N}{1,3}", kCjkKana,
             "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
             "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
             "\\p{N}"};
  }
  if (group == "youtu") {
    return V{
        "[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+|[\\x{FF01}\\x{2026}\\x{201C}\\x{201D}"
        "\\x{2018}\\x{2019}\\x{2014}\\x{FF1A}\\x{FF1B}\\x{FF0C}\\x{3001}-\\x{303F}"
        "\\x{FE30}-\\x{FE4F}]+|[\\x{3105}-\\x{312F}]+|" +
            std::string(kCjkKana),
        SHOAL_CATEGORY_WORDS(
            SHOAL_CONTRACTIONS
            "?") "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
  }
  if (group == "deepseek-coder") {
    return V{"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjkHangul, "\\p{N}"};
  }
  if (group == "falcon") return V{"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2Regex, "[0-9][0-9][0-9]"};
  if (group == "starcoder") return V{"\\p{N}", kGpt2Regex};
  if (group == "gpt2") return V{kGpt2Regex};
  if (group == "qwen2") return V{kQwen2};
  if (group == "qwen35") {
    return V{SHOAL_CONTRACTIONS
             "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
             "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
  }
  if (group == "bloom") return V{kBloom};
  if (group == "viking") return V{kBloom, "\\p{N}"};
  if (group == "tekken") {
    return V{SHOAL_CASE_WORDS(
        "", "") "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
  }
  if (group == "chameleon") {
    return V{"<sentinel:[0-9]+>",      "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
             "([\\t\\n]|    |  )",     "\\p{N}",
             "[\\p{P}!-/:-@\\[-`{-~]", kGpt2Regex};
  }
  if (group == "gpt-4o") return V{SHOAL_CASE_WORDS("", SHOAL_CONTRACTIONS "?") SHOAL_GPT4O_REST};
  if (group == "granite-emb-multi") {
    return V{SHOAL_CASE_WORDS("\\p{M}", SHOAL_CONTRACTIONS "?") SHOAL_GPT4O_REST};
  }
  if (group == "tiny_aya") {
    return V{"\\d{1,3}(?=(?:\\d{3})*\\b)",
             SHOAL_CATEGORY_WORDS(SHOAL_CONTRACTIONS "?") SHOAL_GPT4O_REST};
  }
  if (group == "kimi-k2") return V{"\\p{Han}+"};
  if (group == "superbpe") return V{"\\p{N}+", "(?=(\\d{3})+(?!\\d))"};
  if (group == "bailingmoe") {
    return V{
        "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
        " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"};
  }
  if (group == "seed-coder") {
    return V{SHOAL_CONTRACTIONS
             "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|"
             "\\s+(?!\\S)|\\s+"};
  }
  if (group == "ufakzeka") {
    return V{
        "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
        "\\s+(?!\\S)|\\s+"};
  }
  if (group == "afmoe") {
    return V{"\\p{AFMoE_digits}",
             "[\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{F900}-\\x{FAFF}\\x{3040}-\\x{309F}"
             "\\x{30A0}-\\x{30FF}\\x{FF65}-\\x{FF9F}\\x{2F00}-\\x{2FDF}\\x{E40}-\\x{E7F}"
             "\\x{E80}-\\x{EFF}\\x{1780}-\\x{17FF}\\x{1000}-\\x{109F}\\x{AA60}-\\x{AA7F}"
             "\\x{A9E0}-\\x{A9FF}\\x{AC00}-\\x{D7AF}\\x{1100}-\\x{11FF}]+",
             "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?"
             "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
  }
  if (group == "laguna") return V{"[^\\n]+|[\\n]+", kQwen2};
  if (group == "exaone-moe") {
    return V{SHOAL_CONTRACTIONS
             "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}|"
             " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"};
  }
  if (group == "gemma4") return V{"[^\\n]+|[\\n]+"};
  if (group == "minicpm5") {
    return V{"\\p{N}{1,3}", SHOAL_CONTRACTIONS
             "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
             "\\s+(?!\\S)|\\s+"};
  }
  if (group == "whitespace") return V{"\\S+"};
  return V{kDefaultPunct, kGpt2Regex, "\\p{N}+", "[0-9][0-9][0-9]"};  // "default"
}

struct Entry {
  const char* names;  // comma-separated
  const char* group;  // regex list, see RegexesFor
  bool clean_spaces = true;
  bool ignore_merges = false;
  bool add_bos = false;
  bool raw_utf8 = false;  // SPM-style BPE: escape spaces, no byte encoding
};

const Entry kEntries[] = {
    {"default", "default"},
    {"minicpm5", "minicpm5", true, true},
    {"llama3,llama-v3,llama-bpe,falcon3,falcon-h1,pixtral,midm-2.0,lfm2,jina-v5-nano", "llama3",
     true, true, true},
    {"deepseek-llm", "deepseek-llm", false},
    {"deepseek-coder", "deepseek-coder", false},
    {"deepseek-v3,hunyuan-dense,hy_v4,joyai-llm", "deepseek-v3", false},
    {"spark2_5", "spark2_5", false},
    {"youtu", "youtu", false, true},
    {"falcon", "falcon"},
    {"mpt,gpt-2,phi-2,jina-es,jina-de,gigachat,jina-v2-es,jina-v2-de,a.x-4.0,mellum,"
     "modern-bert,exaone4,olmo,jais,jina-v1-en,jina-v2-code,roberta-bpe",
     "gpt2"},
    {"trillion,granite-docling", "gpt2", false},
    {"jais-2", "jais2"},
    {"gemma4,granite-embed-multi-311m", "gemma4", true, false, false, true},
    {"sarvam-moe", "gemma4", false, false, false, true},
    {"whitespace", "whitespace"},
    {"starcoder,refact,codeshell,exaone,minerva-7b,mellum2", "starcoder"},
    {"command-r,smollm", "starcoder", false},
    {"qwen2,deepseek-r1-qwen,kormo,f2llmv2,hunyuan,grok-2,solar-open", "qwen2", false},
    {"stablelm2,megrez", "qwen2"},
    {"qwen35", "qwen35", false},
    {"dbrx,smaug-bpe,glm4,chatglm-bpe", "llama3"},
    {"poro-chat", "bloom", false},
    {"bloom,gpt3-finnish", "bloom"},
    {"viking", "viking", false},
    {"tekken", "tekken", false, true, true},
    {"chameleon", "chameleon", false, false, true},
    {"gpt-4o,llama4,kanana2,talkie,minimax-m2", "gpt-4o", false},
    {"granite-embed-multi-97m", "granite-emb-multi", false, true},
    {"tiny_aya,cohere2moe", "tiny_aya", false},
    {"superbpe", "superbpe", false},
    {"bailingmoe,bailingmoe2,llada-moe", "bailingmoe", false},
    {"seed-coder", "seed-coder", false},
    {"kimi-k2", "kimi-k2", false},
    {"ufakzeka", "ufakzeka", false},
    {"afmoe", "afmoe", false},
    {"laguna", "laguna", false},
    {"exaone-moe", "exaone-moe"},
};

}  // namespace

Result<PreTokenizerConfig> LookupPreTokenizer(std::string_view pre) {
  const std::string_view key = pre.empty() ? std::string_view("default") : pre;
  for (const Entry& e : kEntries) {
    for (std::string_view names = e.names; !names.empty();) {
      const size_t comma = names.find(',');
      const std::string_view name = names.substr(0, comma);
      names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
      if (key != name) continue;
      PreTokenizerConfig c;
      c.name = std::string(pre);
      c.regexes = RegexesFor(e.group);
      c.clean_spaces = e.clean_spaces;
      c.ignore_merges = e.ignore_merges;
      c.add_bos = e.add_bos;
      c.byte_encode = !e.raw_utf8 && pre != "whitespace";
      c.escape_whitespaces = e.raw_utf8;
      c.no_bos = pre == "glm4" || pre == "chatglm-bpe";
      c.add_sep = pre == "jina-v1-en" || pre == "jina-v2-code" || pre == "roberta-bpe";
      c.lowercase = pre != "whitespace";
      return c;
    }
  }
  return Errorf("unknown pre-tokenizer type: '{}'", pre);
}

}  // namespace shoal::tok
