// Golden tests: Shoal's forward pass against llama.cpp's recorded outputs (../shared/testdata).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>

#include "engine/engine.h"
#include "engine/perplexity.h"
#include "golden_util.h"
#include "tokenizer/tokenizer.h"

namespace shoal::testing {
namespace {

using nlohmann::json;

struct GoldenCase {
  std::string model;   // relative to shared/models
  std::string golden;  // relative to shared/testdata/golden
};

std::vector<int32_t> Ids(const json& a) { return a.get<std::vector<int32_t>>(); }

// Greedy step logits and margins: the two golden layouts name them differently.
std::vector<float> StepLogits(const json& g) {
  return (g.contains("logits") ? g["logits"] : g["top1_logits"]).get<std::vector<float>>();
}
std::vector<float> StepMargins(const json& g) {
  return (g.contains("margins_top1_minus_top2") ? g["margins_top1_minus_top2"]
                                                : g["top1_minus_top2"])
      .get<std::vector<float>>();
}

// llama.cpp's main-vs-alt spread for a prompt: the recorded full-logit figure, or (files without
// full logits) the largest difference over ids in both first-step top-20 lists.
float Spread(const json& p) {
  if (p.contains("first_step_max_abs_diff_main_vs_alt"))
    return p["first_step_max_abs_diff_main_vs_alt"].get<float>();
  std::map<int32_t, float> main;
  for (const json& e : p["first_step_top20"]) main[e[0].get<int32_t>()] = e[1].get<float>();
  float s = 0;
  for (const json& e : p["first_step_top20_alt"]) {
    auto it = main.find(e[0].get<int32_t>());
    if (it != main.end()) s = std::max(s, std::fabs(it->second - e[1].get<float>()));
  }
  return s;
}

// A spread of exactly 0 (a BOS-only prompt) still leaves float rounding: allow 1e-6 relative.
float WithRounding(float tol, float ref) {
  return std::max(tol, 1e-6f * std::max(1.0f, std::fabs(ref)));
}

class TeacherForced : public ::testing::TestWithParam<GoldenCase> {};

// Feeds prompt + golden greedy ids; at every step the logit of the golden id must be within
// llama.cpp's own main-vs-alt spread of its logit, and the arg-max must agree wherever the
// golden margin exceeds that spread.
TEST_P(TeacherForced, LogitsWithinLlamaCppSpread) {
  const GoldenCase& c = GetParam();
  const std::string model_path = SharedPath("models/" + c.model);
  const std::string golden_path = SharedPath("testdata/golden/" + c.golden);
  if (!Exists(model_path) || !Exists(golden_path)) GTEST_SKIP() << "missing " << model_path;
  auto m = Load(model_path, DType::kF16);
  ASSERT_TRUE(m) << model_path;
  const json g = LoadJson(golden_path);
  // The spread recorded in the file: the largest first-step |main - alt| over its prompts.
  float tol = 0;
  for (const json& p : g["prompts"]) tol = std::max(tol, Spread(p));
  int checked = 0, argmax_checked = 0;
  for (const json& p : g["prompts"]) {
    const std::vector<int32_t> prompt = Ids(p["prompt_ids"]);
    const std::vector<int32_t> gen = Ids(p["greedy"]["ids"]);
    const std::vector<float> ref = StepLogits(p["greedy"]);
    const std::vector<float> margins = StepMargins(p["greedy"]);
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), gen.begin(), gen.end() - 1);
    auto rows =
        RunSequence(*m, seq, static_cast<int>(prompt.size()) - 1, static_cast<int>(prompt.size()));
    ASSERT_EQ(rows.size(), gen.size());
    for (size_t i = 0; i < gen.size(); ++i) {
      const float ours = rows[i][static_cast<size_t>(gen[i])];
      EXPECT_NEAR(ours, ref[i], tol) << c.model << " " << p["name"] << " step " << i;
      ++checked;
      if (margins[i] > tol) {
        EXPECT_EQ(ArgMax(rows[i]), gen[i]) << c.model << " " << p["name"] << " step " << i;
        ++argmax_checked;
      }
    }
  }
  RecordProperty("steps_checked", checked);
  RecordProperty("argmax_checked", argmax_checked);
}

// With an F32 KV cache Shoal computes attention like llama.cpp's non-flash path ("alt" run).
TEST_P(TeacherForced, F32CacheMatchesAltRunFirstStep) {
  const GoldenCase& c = GetParam();
  const std::string model_path = SharedPath("models/" + c.model);
  const std::string golden_path = SharedPath("testdata/golden/" + c.golden);
  if (!Exists(model_path) || !Exists(golden_path)) GTEST_SKIP() << "missing " << model_path;
  auto m = Load(model_path, DType::kF32);
  ASSERT_TRUE(m);
  const json g = LoadJson(golden_path);
  for (const json& p : g["prompts"]) {
    const std::vector<int32_t> prompt = Ids(p["prompt_ids"]);
    // The alt run is plain F32 math: Shoal's F32 cache must land well inside the main-vs-alt
    // spread of this very prompt.
    const float tol = Spread(p);
    auto rows = RunSequence(*m, prompt, static_cast<int>(prompt.size()) - 1);
    ASSERT_EQ(rows.size(), 1u);
    for (const json& e : p["first_step_top20_alt"]) {
      const int32_t id = e[0].get<int32_t>();
      EXPECT_NEAR(rows[0][static_cast<size_t>(id)], e[1].get<float>(),
                  WithRounding(tol, e[1].get<float>()))
          << c.model << " " << p["name"] << " id " << id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Dense, TeacherForced,
    ::testing::Values(
        GoldenCase{"stories260K.gguf", "stories260K.golden.json"},
        GoldenCase{"llama-2-tiny-random.gguf", "llama-2-tiny-random.golden.json"},
        GoldenCase{"tiny-dense256-random-q8_0.gguf", "tiny-dense256-random-q8_0.golden.json"},
        GoldenCase{"tiny-dense256-random-q4_0.gguf", "tiny-dense256-random-q4_0.golden.json"},
        GoldenCase{"tiny-dense256-random-q4_k_m.gguf", "tiny-dense256-random-q4_k_m.golden.json"},
        GoldenCase{"tiny/llama-f32.gguf", "arch/llama-f32.json"},
        GoldenCase{"tiny/llama-q8_0.gguf", "arch/llama-q8_0.json"},
        GoldenCase{"tiny/llama-q4_0.gguf", "arch/llama-q4_0.json"},
        GoldenCase{"tiny/qwen3-f32.gguf", "arch/qwen3-f32.json"},
        GoldenCase{"tiny/qwen3-q8_0.gguf", "arch/qwen3-q8_0.json"},
        GoldenCase{"tiny/qwen3-q4_0.gguf", "arch/qwen3-q4_0.json"},
        GoldenCase{"tiny-moe256-random-q4_k_m.gguf", "tiny-moe256-random-q4_k_m.golden.json"},
        GoldenCase{"tiny/qwen3moe-f32.gguf", "arch/qwen3moe-f32.json"},
        GoldenCase{"tiny/qwen3moe-q8_0.gguf", "arch/qwen3moe-q8_0.json"},
        GoldenCase{"tiny/qwen3moe-q4_0.gguf", "arch/qwen3moe-q4_0.json"},
        GoldenCase{"tiny/deepseek2-f32.gguf", "arch/deepseek2-f32.json"},
        // deepseek2-q4_0 is checked in arch_golden_test (alt run, exact): with the F16 cache its
        // steps 25+ leave llama.cpp's by 0.1-0.2 after a flipped router choice (the same file's
        // main and alt runs part after 5-15 steps).
        GoldenCase{"tiny/deepseek2-q8_0.gguf", "arch/deepseek2-q8_0.json"}),
    [](const auto& info) {
      std::string n = info.param.model;
      for (char& ch : n)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

// stories260K is trained: free-running greedy generation is compared with llama.cpp's 64 golden
// ids of each prompt (which its own F16-cache and F32-cache runs both produce), and the
// first-step logits must be within 2e-2 (they span about +-18). With `strict`, every id of
// every prompt must match; otherwise ids up to the first near-tie (a golden top-1/top-2 margin
// below 2e-2). Returns how many prompts reproduce all 64 ids.
int StoriesGreedy(DType kv_type, bool strict) {
  const std::string model_path = SharedPath("models/stories260K.gguf");
  auto m = Load(model_path, kv_type);
  EXPECT_TRUE(m);
  if (!m) return 0;
  const json g = LoadJson(SharedPath("testdata/golden/stories260K.golden.json"));
  EngineConfig cfg;
  cfg.n_threads = 2;
  cfg.n_ctx = 1024;
  cfg.kv_dtype = kv_type;
  cfg.return_logits = true;
  auto engine = Engine::Create(m->model.get(), cfg, {});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return 0;
  int prompts_identical = 0;
  for (const json& p : g["prompts"]) {
    Request r;
    r.prompt = Ids(p["prompt_ids"]);
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 64;
    r.sampling.ignore_eos = true;
    EXPECT_TRUE((*engine)->Add(r).ok());
    std::vector<int32_t> got;
    std::vector<float> first;
    while (!(*engine)->idle()) {
      auto ev = (*engine)->Step();
      EXPECT_TRUE(ev.ok()) << ev.status().message();
      if (!ev.ok()) return 0;
      for (auto& e : *ev) {
        if (got.empty()) first = e.logits;
        got.push_back(e.token);
      }
    }
    const std::vector<int32_t> want = Ids(p["greedy"]["ids"]);
    const std::vector<float> margins = StepMargins(p["greedy"]);
    size_t must_match = want.size();
    for (size_t i = 0; !strict && i < margins.size(); ++i)
      if (margins[i] < 2e-2f) {
        must_match = i;  // ids before the first near-tie
        break;
      }
    EXPECT_EQ(got.size(), want.size());
    if (got.size() != want.size()) return 0;
    for (size_t i = 0; i < must_match; ++i)
      EXPECT_EQ(got[i], want[i]) << p["name"] << " step " << i;
    if (got != want) {
      size_t d = 0;
      while (got[d] == want[d]) ++d;
      std::fprintf(stderr, "%s: diverges at step %zu (golden margin %.4f)\n",
                   p["name"].get<std::string>().c_str(), d, margins[d]);
    }
    prompts_identical += got == want;
    const std::vector<float> ref = p["first_step_logits"].get<std::vector<float>>();
    EXPECT_EQ(first.size(), ref.size());
    float max_diff = 0;
    for (size_t i = 0; i < ref.size() && i < first.size(); ++i)
      max_diff = std::max(max_diff, std::fabs(first[i] - ref[i]));
    EXPECT_LE(max_diff, 2e-2f) << p["name"];
  }
  std::fprintf(stderr, "stories260K, %s KV cache: %d/6 prompts reproduce all 64 greedy ids\n",
               kv_type == DType::kF16 ? "f16" : "f32", prompts_identical);
  return prompts_identical;
}

// F32 cache (llama.cpp's exact-attention numerics): all 64 ids of all 6 prompts.
TEST(Stories260K, GreedyIdsF32Cache) {
  if (!Exists(SharedPath("models/stories260K.gguf"))) GTEST_SKIP();
  EXPECT_EQ(StoriesGreedy(DType::kF32, true), 6);
}

// F16 cache (the default; llama.cpp's flash-attention numerics): ids up to the first near-tie.
TEST(Stories260K, GreedyIdsF16Cache) {
  if (!Exists(SharedPath("models/stories260K.gguf"))) GTEST_SKIP();
  RecordProperty("prompts_identical", StoriesGreedy(DType::kF16, false));
}

// Shoal's own property: the six prompts generated together in one batch and one at a time give
// identical ids and bit-identical logits.
TEST(BatchInvariance, SixPromptsTogetherEqualAlone) {
  const std::string model_path = SharedPath("models/stories260K.gguf");
  if (!Exists(model_path)) GTEST_SKIP();
  const json g = LoadJson(SharedPath("testdata/golden/stories260K.golden.json"));
  auto m = Load(model_path, DType::kF16);
  ASSERT_TRUE(m);
  EngineConfig cfg;
  cfg.n_threads = 2;
  cfg.n_ctx = 1024;
  cfg.return_logits = true;
  cfg.max_num_batched_tokens = 4096;
  using Trace = std::pair<std::vector<int32_t>, std::vector<std::vector<float>>>;
  auto drain = [](Engine& e, std::map<int64_t, size_t>& slot, std::vector<Trace>& traces) {
    while (!e.idle()) {
      auto ev = e.Step();
      ASSERT_TRUE(ev.ok()) << ev.status().message();
      for (auto& x : *ev) {
        traces[slot[x.id]].first.push_back(x.token);
        traces[slot[x.id]].second.push_back(x.logits);
      }
    }
  };
  auto run = [&](bool together) {
    std::vector<Trace> traces;
    auto engine = Engine::Create(m->model.get(), cfg, {});
    EXPECT_TRUE(engine.ok());
    std::map<int64_t, size_t> slot;
    for (const json& p : g["prompts"]) {
      Request r;
      r.prompt = Ids(p["prompt_ids"]);
      r.sampling.temperature = 0;
      r.sampling.max_tokens = 24;
      r.sampling.ignore_eos = true;
      slot[*(*engine)->Add(r)] = traces.size();
      traces.emplace_back();
      if (!together) drain(**engine, slot, traces);
    }
    drain(**engine, slot, traces);
    return traces;
  };
  const auto alone = run(false);
  const auto together = run(true);
  ASSERT_EQ(alone.size(), 6u);
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_EQ(alone[i].first, together[i].first) << "prompt " << i;
    ASSERT_EQ(alone[i].second.size(), together[i].second.size());
    for (size_t s = 0; s < alone[i].second.size(); ++s)
      EXPECT_TRUE(alone[i].second[s] == together[i].second[s]) << "prompt " << i << " step " << s;
  }
}

}  // namespace
}  // namespace shoal::testing

namespace shoal::testing {
namespace {

// Perplexity of stories260K on ppl_story.txt within 0.1% of llama-perplexity's figures.
TEST(Perplexity, Stories260KMatchesLlamaCpp) {
  const std::string model_path = SharedPath("models/stories260K.gguf");
  const std::string text_path = SharedPath("testdata/golden/ppl_story.txt");
  if (!Exists(model_path) || !Exists(text_path)) GTEST_SKIP();
  auto m = Load(model_path, DType::kF16);
  ASSERT_TRUE(m);
  auto tok = Tokenizer::FromGguf(*m->file);
  ASSERT_TRUE(tok.ok());
  std::ifstream in(text_path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const json ref = LoadJson(SharedPath("testdata/golden/stories260K.perplexity.json"));
  const auto ids = (*tok)->Encode(text, true, false);
  EXPECT_EQ(static_cast<int64_t>(ids.size()), ref["n_tokens_with_bos"].get<int64_t>());
  for (const json& run : ref["runs"]) {
    const int32_t n_ctx = run["n_ctx"].get<int32_t>();
    auto r = ComputePerplexity(*m->model, ids, n_ctx, (*tok)->bos(), DType::kF16, m->pool.get());
    ASSERT_TRUE(r.ok()) << r.status().message();
    const double want = run["final_ppl"].get<double>();
    EXPECT_EQ(r->n_chunks, run["n_chunks"].get<int32_t>());
    EXPECT_NEAR(r->ppl, want, want * 1e-3) << "n_ctx " << n_ctx;
    const auto running = run["running_ppl"].get<std::vector<double>>();
    for (size_t i = 0; i < running.size(); ++i)
      EXPECT_NEAR(r->running_ppl[i], running[i], running[i] * 1e-3) << "chunk " << i;
    std::fprintf(stderr, "perplexity n_ctx %d: shoal %.4f llama.cpp %.4f\n", n_ctx, r->ppl, want);
  }
}

}  // namespace
}  // namespace shoal::testing
