// Benchmark workloads (see workload.h).
#include "loadgen/workload.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

namespace shoal::loadgen {

namespace {

// Short, frequent words: single tokens (with the leading space) in Llama, Qwen and GPT vocabs.
constexpr const char* kWords[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "was",    "for",   "that",   "with",
    "as",    "on",    "by",    "he",    "at",    "from",  "his",    "it",    "an",     "were",
    "are",   "which", "this",  "be",    "or",    "has",   "had",    "first", "one",    "their",
    "its",   "new",   "after", "but",   "who",   "not",   "they",   "have",  "her",    "she",
    "two",   "been",  "other", "when",  "there", "all",   "during", "into",  "school", "time",
    "may",   "years", "more",  "most",  "only",  "over",  "city",   "some",  "world",  "would",
    "where", "later", "up",    "such",  "used",  "many",  "can",    "state", "about",  "national",
    "out",   "known", "also",  "team",  "game",  "river", "house",  "water", "light",  "music",
    "red",   "green", "blue",  "small", "large", "old",   "young",  "long",  "short",  "high",
    "day",   "night", "year",  "book",  "road",  "tree",  "stone",  "king",  "song",   "story",
};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

// A uniform double in [0, 1) from 53 random bits.
double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

std::vector<RequestSpec> SyntheticRequests(int64_t n, int64_t input_len, int64_t output_len,
                                           uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<RequestSpec> out(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (RequestSpec& r : out) {
    for (int64_t w = 0; w < input_len; ++w) {
      if (w > 0) r.prompt.push_back(' ');
      r.prompt += kWords[rng() % kNumWords];
    }
    r.prompt_tokens = input_len;
    r.output_len = output_len;
  }
  return out;
}

Result<std::vector<RequestSpec>> LoadDataset(const std::string& path, int64_t n,
                                             int64_t default_output_len) {
  std::ifstream in(path);
  if (!in) return Errorf("cannot open dataset {}", path);
  std::vector<RequestSpec> lines;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto prompt = j.is_object() ? j.find("prompt") : j.end();
    if (j.is_discarded() || !j.is_object() || prompt == j.end() || !prompt->is_string())
      return Errorf("{}:{}: expected a JSON object with a string \"prompt\"", path, line_no);
    RequestSpec r;
    r.prompt = prompt->get<std::string>();
    r.output_len = default_output_len;
    if (auto o = j.find("output_len"); o != j.end()) {
      if (!o->is_number_integer() || o->get<int64_t>() < 1)
        return Errorf("{}:{}: \"output_len\" must be a positive integer", path, line_no);
      r.output_len = o->get<int64_t>();
    }
    int64_t words = 0;
    bool in_word = false;
    for (char c : r.prompt) {
      const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
      if (!space && !in_word) ++words;
      in_word = !space;
    }
    r.prompt_tokens = words;
    lines.push_back(std::move(r));
  }
  if (lines.empty()) return Errorf("dataset {} has no prompts", path);
  std::vector<RequestSpec> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(lines[static_cast<size_t>(i) % lines.size()]);
  return out;
}

std::vector<double> ArrivalOffsets(int64_t n, double rate, uint64_t seed) {
  std::vector<double> out(static_cast<size_t>(std::max<int64_t>(n, 0)), 0.0);
  if (std::isinf(rate) || rate <= 0) return out;
  std::mt19937_64 rng(seed);
  double t = 0;
  for (size_t i = 1; i < out.size(); ++i) {
    t += -std::log1p(-Uniform01(rng)) / rate;  // exponential gap with mean 1/rate
    out[i] = t;
  }
  return out;
}

}  // namespace shoal::loadgen
