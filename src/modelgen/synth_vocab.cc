// BuildSynthVocab: a prefix-closed SPM vocabulary of English words, their prefixes and n-grams.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "modelgen/synth.h"

namespace shoal {
namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581 "▁", SentencePiece's space
// Most tokens a vocabulary may have (bounds memory; real vocabularies are < 300k).
constexpr int64_t kMaxVocab = int64_t{1} << 21;

// Common English words (roughly by frequency, with the everyday words of children's stories so
// that TinyStories-style prompts tokenize into whole words). Letters only.
// clang-format off
constexpr std::string_view kWords[] = {
    "the", "and", "to", "a", "was", "he", "she", "it", "of", "in", "they", "you", "that", "his",
    "her", "with", "said", "on", "for", "is", "had", "i", "at", "but", "so", "we", "be", "not",
    "one", "day", "very", "as", "all", "were", "have", "there", "up", "little", "time", "out",
    "big", "what", "saw", "do", "him", "them", "are", "wanted", "can", "go", "me", "happy", "play",
    "once", "upon", "named", "from", "this", "my", "like", "when", "an", "then", "friends", "mom",
    "by", "too", "no", "or", "would", "see", "will", "their", "if", "about", "could", "who", "did",
    "been", "has", "more", "into", "some", "other", "than", "its", "our", "how", "your", "which",
    "just", "know", "get", "make", "made", "way", "people", "because", "good", "new", "first",
    "also", "after", "back", "over", "only", "any", "these", "two", "may", "well", "where", "much",
    "even", "most", "many", "here", "home", "come", "came", "went", "look", "looked", "felt",
    "help", "helped", "toy", "dog", "cat", "ball", "tree", "park", "girl", "boy", "lily", "tom",
    "ben", "sue", "tim", "sam", "max", "anna", "sara", "bird", "fish", "bear", "sun", "sky", "red",
    "blue", "green", "yellow", "small", "bright", "fun", "love", "loved", "nice", "kind", "sad",
    "scared", "tired", "hungry", "together", "again", "always", "never", "now", "soon", "every",
    "something", "thing", "things", "found", "find", "took", "take", "gave", "give", "run", "ran",
    "jump", "jumped", "walk", "walked", "smiled", "smile", "laughed", "cried", "asked", "told",
    "tell", "knew", "think", "thought", "feel", "want", "need", "started", "decided", "tried",
    "learned", "became", "outside", "inside", "around", "under", "down", "near", "far", "away",
    "before", "while", "until", "yes", "okay", "thank", "thanks", "please", "sorry", "hello",
    "friend", "mommy", "daddy", "dad", "mother", "father", "sister", "brother", "family", "house",
    "room", "garden", "flower", "flowers", "water", "food", "cake", "apple", "car", "truck", "boat",
    "box", "book", "hat", "shoe", "door", "window", "bed", "table", "chair", "school", "teacher",
    "class", "game", "games", "story", "world", "life", "year", "years", "night", "morning", "days",
    "hand", "head", "eyes", "face", "heart", "name", "place", "part", "work", "long", "great",
    "old", "young", "right", "left", "high", "last", "next", "best", "better", "same", "different",
    "own", "few", "still", "should", "must", "might", "each", "such", "those", "why", "let", "put",
    "keep", "kept", "show", "showed", "try", "call", "called", "ask", "use", "used", "say", "says",
    "going", "playing", "looking", "having", "being", "doing", "making", "getting", "coming",
    "nothing", "everything", "everyone", "someone", "anything", "special", "beautiful", "pretty",
    "funny", "shiny", "soft", "warm", "cold", "hot", "fast", "slow", "loud", "quiet", "careful",
    "brave", "strong", "proud", "surprised", "excited", "angry", "afraid", "safe", "sharp", "idea",
    "lesson", "important", "remember", "understand", "believe", "share", "shared", "sharing",
    "listen", "listened", "hug", "hugged", "stop", "stopped", "open", "opened", "close", "closed",
    "clean", "dirty", "wet", "dry", "rain", "snow", "wind", "sea", "beach", "sand", "rock", "hill",
    "forest", "river", "lake", "moon", "star", "stars", "king", "queen", "prince", "princess",
    "monster", "dragon", "magic", "wish", "dream", "sleep", "slept", "wake", "woke", "eat", "ate",
    "drink", "sing", "sang", "song", "dance", "danced", "draw", "paint", "build", "built", "fly",
    "flew", "swim", "climb", "climbed", "hide", "hid", "seek", "catch", "caught", "throw", "threw",
    "fell", "fall", "hurt", "cry", "laugh", "talk", "talked", "answer", "question", "number",
    "color", "colors", "shape", "three", "four", "five", "ten", "hundred", "end", "ending",
    "beginning", "begin", "began", "through", "during", "without", "against", "between", "however",
    "another", "both", "though", "although", "enough", "really", "maybe", "quickly", "slowly",
    "suddenly", "finally", "later", "today", "tomorrow", "yesterday", "ever", "already", "almost",
    "often", "sometimes", "usually",
};
// clang-format on

// Common suffixes (as pieces without "▁"), most frequent first.
constexpr std::string_view kSuffixes[] = {
    "ing",  "ed",  "er",  "ly", "es",  "est", "ers",  "tion",  "ment", "ness", "ful", "less",
    "able", "ous", "ive", "al", "ity", "ies", "ings", "ation", "ance", "ence", "ish", "ize",
};

// English letter frequencies (per mille) for ordering the generated n-grams.
constexpr int kLetterFreq[26] = {82, 15, 28, 43, 127, 22, 20, 61, 70, 2,  8, 40, 24,
                                 67, 75, 19, 1,  60,  63, 91, 28, 10, 24, 2, 20, 1};

// Number of UTF-8 characters (pieces hold only ASCII and "▁").
int64_t CharCount(std::string_view s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// `s` without its last UTF-8 character.
std::string_view DropLastChar(std::string_view s) {
  size_t k = s.size();
  while (k > 0 && (static_cast<unsigned char>(s[k - 1]) & 0xC0) == 0x80) --k;
  return s.substr(0, k > 0 ? k - 1 : 0);
}

class VocabBuilder {
 public:
  explicit VocabBuilder(int64_t n_vocab) : n_vocab_(n_vocab) {}
  bool full() const { return static_cast<int64_t>(v_.tokens.size()) >= n_vocab_; }
  bool Has(const std::string& s) const { return seen_.count(s) > 0; }
  // Adds a token unless present or full; normal tokens get strictly decreasing scores.
  void Add(const std::string& s, int32_t type) {
    if (full() || !seen_.insert(s).second) return;
    v_.tokens.push_back(s);
    v_.scores.push_back(type == kTokenNormal ? -static_cast<float>(n_normal_++) : 0.0f);
    v_.types.push_back(type);
  }
  // Adds a multi-character piece only if its left part is a token (keeps the prefix closure).
  void AddPiece(const std::string& s) {
    if (Has(std::string(DropLastChar(s)))) Add(s, kTokenNormal);
  }
  const std::vector<std::string>& tokens() const { return v_.tokens; }
  SynthVocab Take() { return std::move(v_); }

 private:
  int64_t n_vocab_;
  int64_t n_normal_ = 0;
  SynthVocab v_;
  std::unordered_set<std::string> seen_;
};

// Word forms with weights: "▁word" (word starts after a space), "word" (inside a longer word or
// after punctuation), "▁Word" (sentence start), and the suffixes. Every prefix of at least two
// characters gets the sum of the weights of the forms it starts; integer weights make a prefix's
// weight exactly >= any of its extensions, so sorting by weight (ties: shorter first) lists
// prefixes first.
std::vector<std::string> WordPieces() {
  std::map<std::string, uint64_t> weight;
  auto add_form = [&](const std::string& form, uint64_t wt) {
    for (size_t len = 1; len <= form.size(); ++len) {
      const std::string_view prefix(form.data(), len);
      if (len < form.size() && (static_cast<unsigned char>(form[len]) & 0xC0) == 0x80) continue;
      if (CharCount(prefix) >= 2) weight[std::string(prefix)] += wt;
    }
  };
  std::unordered_set<std::string_view> done;
  uint64_t rank = 0;
  for (std::string_view w : kWords) {
    if (!done.insert(w).second) continue;
    const uint64_t base = 1000000 / (rank++ + 10);  // Zipf-like
    std::string cap(w);
    cap[0] = static_cast<char>(cap[0] - 'a' + 'A');
    add_form(std::string(kSpace) + std::string(w), base * 10);
    add_form(std::string(w), base * 3);
    add_form(std::string(kSpace) + cap, base * 2);
  }
  for (size_t k = 0; k < std::size(kSuffixes); ++k) {
    add_form(std::string(kSuffixes[k]), 1000000 / (k + 20) * 3);
  }
  std::vector<std::pair<std::string, uint64_t>> sorted(weight.begin(), weight.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    if (a.first.size() != b.first.size()) return a.first.size() < b.first.size();
    return a.first < b.first;
  });
  std::vector<std::string> out;
  out.reserve(sorted.size());
  for (auto& [s, w] : sorted) out.push_back(std::move(s));
  return out;
}

// Adds the strings "▁"?[a-z]+ that are not tokens yet, most probable first under a unigram
// model of English letters ("▁" as likely as a word start), until the vocabulary is full: short
// frequent n-grams ("▁th", "ion") come before long or rare ones ("qz"). Best-first enumeration of
// the trie whose children are sorted by probability: popping a string pushes its first child and
// its next sibling, so each string is visited once, after its parent, and the queue stays small.
void AddNgrams(VocabBuilder* b) {
  struct Sym {
    std::string s;
    double p;
  };
  std::vector<Sym> letters;
  for (int c = 0; c < 26; ++c) letters.push_back({std::string(1, 'a' + c), kLetterFreq[c] / 1e3});
  std::stable_sort(letters.begin(), letters.end(),
                   [](const Sym& x, const Sym& y) { return x.p > y.p; });
  std::vector<Sym> first = letters;  // the first character may also be "▁"
  first.insert(first.begin(), Sym{std::string(kSpace), 0.18});

  struct Node {
    double w;         // probability of s
    double parent_w;  // probability of its parent (s without its last character)
    std::string s;
    size_t parent_len;  // bytes of the parent
    int idx;            // position of the last character in the parent's alphabet
    bool operator<(const Node& o) const { return w != o.w ? w < o.w : s > o.s; }
  };
  std::priority_queue<Node> q;
  q.push({first[0].p, 1.0, first[0].s, 0, 0});
  while (!b->full() && !q.empty()) {
    const Node n = q.top();
    q.pop();
    const std::vector<Sym>& alphabet = n.parent_len == 0 ? first : letters;
    if (n.idx + 1 < static_cast<int>(alphabet.size())) {
      const Sym& next = alphabet[n.idx + 1];
      q.push({n.parent_w * next.p, n.parent_w, n.s.substr(0, n.parent_len) + next.s, n.parent_len,
              n.idx + 1});
    }
    q.push({n.w * letters[0].p, n.w, n.s + letters[0].s, n.s.size(), 0});
    if (CharCount(n.s) >= 2 && !b->Has(n.s)) b->AddPiece(n.s);
  }
}

}  // namespace

Result<SynthVocab> BuildSynthVocab(int64_t n_vocab) {
  if (n_vocab < kSynthVocabMin || n_vocab > kMaxVocab) {
    return Errorf("synthetic vocabulary: n_vocab {} is outside [{}, {}]", n_vocab, kSynthVocabMin,
                  kMaxVocab);
  }
  VocabBuilder b(n_vocab);
  b.Add("<unk>", kTokenUnknown);
  b.Add("<s>", kTokenControl);
  b.Add("</s>", kTokenControl);
  for (int c = 0; c < 256; ++c) b.Add(fmt::format("<0x{:02X}>", c), kTokenByte);
  b.Add(std::string(kSpace), kTokenNormal);
  for (char c = '!'; c <= '~'; ++c) b.Add(std::string(1, c), kTokenNormal);

  for (const std::string& piece : WordPieces()) b.AddPiece(piece);

  AddNgrams(&b);
  SynthVocab v = b.Take();
  if (static_cast<int64_t>(v.tokens.size()) != n_vocab) {
    return Errorf("synthetic vocabulary: could only make {} of {} tokens", v.tokens.size(),
                  n_vocab);
  }
  return v;
}

}  // namespace shoal
