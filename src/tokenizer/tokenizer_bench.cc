// Tokenizer speed: loading a vocabulary, and encoding / decoding ~10 KB of English text with
// SPM (32k), byte-level BPE (gpt-2 50k, deepseek-llm 102k) and WordPiece vocabularies.
// Data comes from $SHOAL_SHARED_DIR (default: ../shared, i.e. run from the repository root).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace shoal {
namespace {

const std::string kShared =
    std::getenv("SHOAL_SHARED_DIR") ? std::getenv("SHOAL_SHARED_DIR") : "../shared";
const char* const kVocabs[] = {"llama-spm", "gpt-2", "deepseek-llm", "bert-bge"};

std::string Text10k() {
  std::ifstream in(kShared + "/testdata/golden/ppl_story.txt", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string story = ss.str() + " Caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC 12345 \xF0\x9F\xA6\x99\n";
  std::string text;
  while (text.size() < 10000) text += story;
  return text.substr(0, 10000);
}

const Tokenizer& Get(const std::string& vocab) {
  static auto* cache = new std::map<std::string, std::unique_ptr<Tokenizer>>();
  auto& t = (*cache)[vocab];
  if (!t) {
    auto f = gguf::File::Open(kShared + "/testdata/vocab/ggml-vocab-" + vocab + ".gguf");
    t = std::move(*Tokenizer::FromGguf(**f));
  }
  return *t;
}

void BM_Load(benchmark::State& state) {
  const std::string path =
      kShared + "/testdata/vocab/ggml-vocab-" + kVocabs[state.range(0)] + ".gguf";
  for (auto _ : state) {
    auto f = gguf::File::Open(path);
    auto t = Tokenizer::FromGguf(**f);
    benchmark::DoNotOptimize(t);
  }
  state.SetLabel(kVocabs[state.range(0)]);
}

void BM_Encode10k(benchmark::State& state) {
  const Tokenizer& t = Get(kVocabs[state.range(0)]);
  const std::string text = Text10k();
  size_t n = 0;
  for (auto _ : state) {
    auto ids = t.Encode(text, true, true);
    n = ids.size();
    benchmark::DoNotOptimize(ids);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.SetLabel(std::string(kVocabs[state.range(0)]) + ", " + std::to_string(n) + " tokens");
}

void BM_Decode10k(benchmark::State& state) {
  const Tokenizer& t = Get(kVocabs[state.range(0)]);
  const std::vector<int32_t> ids = t.Encode(Text10k(), true, true);
  for (auto _ : state) benchmark::DoNotOptimize(t.Decode(ids, false));
  state.SetLabel(kVocabs[state.range(0)]);
}

BENCHMARK(BM_Load)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Encode10k)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode10k)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shoal

BENCHMARK_MAIN();
