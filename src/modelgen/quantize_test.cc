// Tests of QuantizeModel against llama-quantize's own output files.
#include "modelgen/quantize.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "base/test_support.h"
#include "gguf/gguf.h"

namespace shoal {
namespace {

using testing::SharedPath;
using testing::TempDir;

std::unique_ptr<gguf::File> OpenOrDie(const std::string& path) {
  auto f = gguf::File::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? std::move(f).value() : nullptr;
}

// Every tensor of `got` has the type and the exact bytes of the same tensor in `want`.
void ExpectSameTensors(const gguf::File& got, const gguf::File& want) {
  ASSERT_EQ(got.tensors().size(), want.tensors().size());
  for (const auto& w : want.tensors()) {
    const gguf::TensorInfo* g = got.FindTensor(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    EXPECT_EQ(DTypeName(g->type), DTypeName(w.type)) << w.name;
    EXPECT_EQ(g->ne, w.ne) << w.name;
    ASSERT_EQ(g->nbytes, w.nbytes) << w.name;
    EXPECT_EQ(std::memcmp(g->data, w.data, w.nbytes), 0) << w.name << " bytes differ";
  }
}

// Quantizes SHARED/models/tiny/ARCH-f32.gguf to MIX and compares with llama-quantize's file.
void CheckAgainstLlamaQuantize(const std::string& arch, const std::string& mix,
                               const std::string& suffix) {
  const std::string in = SharedPath("models/tiny/" + arch + "-f32.gguf");
  const std::string ref = SharedPath("models/tiny/" + arch + "-" + suffix + ".gguf");
  if (!testing::Exists(in) || !testing::Exists(ref)) GTEST_SKIP() << "missing " << in;
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string out = dir.File("out.gguf");
  QuantizeOptions o;
  o.mix = mix;
  o.n_threads = 2;
  double last = 0;
  o.progress = [&](double f) {
    EXPECT_GE(f, last);
    last = f;
  };
  Status s = QuantizeModel(in, out, o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_DOUBLE_EQ(last, 1.0);
  auto got = OpenOrDie(out);
  auto want = OpenOrDie(ref);
  auto src = OpenOrDie(in);
  ASSERT_TRUE(got && want && src);
  ExpectSameTensors(*got, *want);
  EXPECT_EQ(got->GetUintOr("general.file_type", 999), want->GetUintOr("general.file_type", 998));
  EXPECT_EQ(got->GetUintOr("general.quantization_version", 0), 2u);
  // Every other key is the input's, unchanged.
  std::set<std::string> keys;
  for (const auto& [k, v] : src->metadata()) {
    keys.insert(k);
    if (k == "general.file_type" || k == "general.quantization_version") continue;
    const gguf::Value* g = got->Find(k);
    ASSERT_NE(g, nullptr) << k;
    EXPECT_TRUE(*g == v) << k;
  }
  for (const auto& [k, v] : got->metadata()) {
    EXPECT_TRUE(keys.count(k) || k == "general.file_type" || k == "general.quantization_version")
        << "unexpected key " << k;
  }
}

TEST(QuantizeTest, LlamaQ8_0MatchesLlamaQuantize) {
  CheckAgainstLlamaQuantize("llama", "Q8_0", "q8_0");
}
TEST(QuantizeTest, LlamaQ4_0MatchesLlamaQuantize) {
  CheckAgainstLlamaQuantize("llama", "q4_0", "q4_0");
}
TEST(QuantizeTest, Qwen3Q8_0MatchesLlamaQuantize) {
  CheckAgainstLlamaQuantize("qwen3", "Q8_0", "q8_0");
}
TEST(QuantizeTest, Qwen3Q4_0MatchesLlamaQuantize) {
  CheckAgainstLlamaQuantize("qwen3", "Q4_0", "q4_0");
}
// The 8-expert model: attn_k/attn_v become Q8_0 in the Q4_0 mix.
TEST(QuantizeTest, Qwen3MoeQ4_0MatchesLlamaQuantize) {
  CheckAgainstLlamaQuantize("qwen3moe", "Q4_0", "q4_0");
}
TEST(QuantizeTest, Qwen3MoeQ8_0MatchesLlamaQuantize) {
  CheckAgainstLlamaQuantize("qwen3moe", "Q8_0", "q8_0");
}

// MLA (attn_kv_b counts as a V tensor) and the hybrid Kimi layout with SSM tensors.
TEST(QuantizeTest, Deepseek2Q4_0MatchesLlamaQuantize) {
  CheckAgainstLlamaQuantize("deepseek2", "Q4_0", "q4_0");
}
TEST(QuantizeTest, Deepseek2Q8_0MatchesLlamaQuantize) {
  CheckAgainstLlamaQuantize("deepseek2", "Q8_0", "q8_0");
}
TEST(QuantizeTest, KimiK3Q4_0MatchesLlamaQuantize) {
  CheckAgainstLlamaQuantize("kimi-k3", "Q4_0", "q4_0");
}
TEST(QuantizeTest, KimiK3Q8_0MatchesLlamaQuantize) {
  CheckAgainstLlamaQuantize("kimi-k3", "Q8_0", "q8_0");
}

// Requantizing a 4-expert Q4_K_M model to Q4_K_M picks the same type for every tensor (expert
// ffn_down layers come from the names), so every tensor is copied unchanged.
TEST(QuantizeTest, MoeQ4_K_MToQ4_K_MKeepsEveryTensor) {
  const std::string in = SharedPath("models/tiny-moe256-random-q4_k_m.gguf");
  if (!testing::Exists(in)) GTEST_SKIP() << "missing " << in;
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  QuantizeOptions o;
  o.mix = "Q4_K_M";
  QuantizeStats stats;
  o.stats = &stats;
  Status s = QuantizeModel(in, dir.File("out.gguf"), o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(stats.n_converted, 0);
  auto got = OpenOrDie(dir.File("out.gguf"));
  auto want = OpenOrDie(in);
  ASSERT_TRUE(got && want);
  ExpectSameTensors(*got, *want);
}

// Q4_K_M from a Q8_0 model (requantizing): the per-tensor types llama-quantize chose.
TEST(QuantizeTest, Q4_K_MTypesFollowLlamaCppRules) {
  const std::string in = SharedPath("models/tiny-dense256-random-q8_0.gguf");
  const std::string ref = SharedPath("models/tiny-dense256-random-q4_k_m.gguf");
  if (!testing::Exists(in) || !testing::Exists(ref)) GTEST_SKIP() << "missing " << in;
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  QuantizeOptions o;
  o.mix = "Q4_K_M";
  QuantizeStats stats;
  o.stats = &stats;
  Status s = QuantizeModel(in, dir.File("out.gguf"), o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(stats.n_fallback, 0);
  auto got = OpenOrDie(dir.File("out.gguf"));
  auto want = OpenOrDie(ref);
  ASSERT_TRUE(got && want);
  ASSERT_EQ(got->tensors().size(), want->tensors().size());
  std::map<std::string, int> counts;
  for (const auto& w : want->tensors()) {
    const gguf::TensorInfo* g = got->FindTensor(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    EXPECT_EQ(DTypeName(g->type), DTypeName(w.type)) << w.name;
    ++counts[std::string(DTypeName(g->type))];
  }
  EXPECT_EQ(counts["q4_K"] + counts["q4_k"], 13);
  EXPECT_EQ(counts["q6_K"] + counts["q6_k"], 3);
  EXPECT_EQ(DTypeName(got->FindTensor("blk.1.attn_v.weight")->type), DTypeName(DType::kQ6_K));
  EXPECT_EQ(DTypeName(got->FindTensor("blk.1.ffn_down.weight")->type), DTypeName(DType::kQ6_K));
  EXPECT_EQ(DTypeName(got->FindTensor("output.weight")->type), DTypeName(DType::kQ6_K));
  EXPECT_EQ(got->GetUintOr("general.file_type", 0), 15u);
}

// Every mix runs and gives a loadable file (rows of 64/128 exercise the K-quant fallbacks).
TEST(QuantizeTest, EveryMixWritesALoadableFile) {
  const std::string in = SharedPath("models/tiny/llama-f32.gguf");
  if (!testing::Exists(in)) GTEST_SKIP() << "missing " << in;
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  for (const std::string& mix : QuantizeMixNames()) {
    QuantizeOptions o;
    o.mix = mix;
    QuantizeStats stats;
    o.stats = &stats;
    Status s = QuantizeModel(in, dir.File(mix + ".gguf"), o);
    ASSERT_TRUE(s.ok()) << mix << ": " << s.message();
    auto f = OpenOrDie(dir.File(mix + ".gguf"));
    ASSERT_TRUE(f) << mix;
    EXPECT_EQ(f->GetUintOr("general.file_type", 999), *QuantizeMixFileType(mix)) << mix;
    EXPECT_EQ(DTypeName(f->FindTensor("blk.0.attn_norm.weight")->type), "f32") << mix;
  }
}

// An 8-layer Llama (no GQA) with 256-wide rows written in F32, for the K-quant mix rules.
std::string WriteEightLayerModel(const TempDir& dir) {
  gguf::Writer w;
  w.SetString("general.architecture", "llama");
  w.SetU32("llama.block_count", 8);
  w.SetU32("llama.attention.head_count", 4);
  w.SetU32("llama.attention.head_count_kv", 4);
  uint32_t seed = 1;
  auto matrix = [&](const std::string& name, std::vector<int64_t> ne) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      seed = seed * 1664525u + 1013904223u;
      const float v = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
      std::memcpy(bytes.data() + i * 4, &v, 4);
    }
    EXPECT_TRUE(w.AddTensorCopy(name, DType::kF32, ne, std::move(bytes)).ok()) << name;
  };
  matrix("token_embd.weight", {256, 16});
  matrix("output_norm.weight", {256});
  matrix("output.weight", {256, 16});
  for (int l = 0; l < 8; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    matrix(b + "attn_norm.weight", {256});
    for (const char* m :
         {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      matrix(b + m + ".weight", {256, 8});
    }
  }
  const std::string path = dir.File("eight.gguf");
  EXPECT_TRUE(w.Write(path).ok());
  return path;
}

// Quantizes `in` to `mix`; returns tensor name -> type name of the output.
std::map<std::string, std::string> TypesAfter(const std::string& in, const TempDir& dir,
                                              const std::string& mix) {
  QuantizeOptions o;
  o.mix = mix;
  const std::string out = dir.File(mix + ".gguf");
  Status s = QuantizeModel(in, out, o);
  EXPECT_TRUE(s.ok()) << s.message();
  std::map<std::string, std::string> types;
  auto f = OpenOrDie(out);
  if (f) {
    for (const auto& t : f->tensors()) types[t.name] = std::string(DTypeName(t.type));
  }
  return types;
}

std::string T(DType t) { return std::string(DTypeName(t)); }

// llama.cpp's use_more_bits for 8 layers picks layers 0, 3, 6 and 7.
TEST(QuantizeTest, KQuantMixRulesOnEightLayers) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string in = WriteEightLayerModel(dir);
  const std::set<int> more_bits = {0, 3, 6, 7};
  auto at = [](int l, const char* m) { return "blk." + std::to_string(l) + "." + m + ".weight"; };

  auto q4km = TypesAfter(in, dir, "Q4_K_M");
  auto q5km = TypesAfter(in, dir, "Q5_K_M");
  auto q4ks = TypesAfter(in, dir, "Q4_K_S");
  auto q3km = TypesAfter(in, dir, "Q3_K_M");
  auto q2k = TypesAfter(in, dir, "Q2_K");
  auto q6k = TypesAfter(in, dir, "Q6_K");
  auto mxfp4 = TypesAfter(in, dir, "MXFP4");
  for (int l = 0; l < 8; ++l) {
    const bool more = more_bits.count(l) > 0;
    SCOPED_TRACE("layer " + std::to_string(l));
    EXPECT_EQ(q4km[at(l, "attn_v")], T(more ? DType::kQ6_K : DType::kQ4_K));
    EXPECT_EQ(q4km[at(l, "ffn_down")], T(more ? DType::kQ6_K : DType::kQ4_K));
    EXPECT_EQ(q4km[at(l, "attn_q")], T(DType::kQ4_K));
    EXPECT_EQ(q5km[at(l, "attn_v")], T(more ? DType::kQ6_K : DType::kQ5_K));
    EXPECT_EQ(q5km[at(l, "ffn_down")], T(more ? DType::kQ6_K : DType::kQ5_K));
    EXPECT_EQ(q5km[at(l, "ffn_up")], T(DType::kQ5_K));
    EXPECT_EQ(q4ks[at(l, "attn_v")], T(l < 4 ? DType::kQ5_K : DType::kQ4_K));
    EXPECT_EQ(q4ks[at(l, "ffn_down")], T(l < 1 ? DType::kQ5_K : DType::kQ4_K));
    EXPECT_EQ(q3km[at(l, "attn_v")], T(l < 2 ? DType::kQ5_K : DType::kQ4_K));
    EXPECT_EQ(q3km[at(l, "ffn_down")], T(DType::kQ4_K));
    EXPECT_EQ(q3km[at(l, "attn_output")], T(DType::kQ4_K));
    EXPECT_EQ(q3km[at(l, "attn_k")], T(DType::kQ3_K));
    EXPECT_EQ(q2k[at(l, "attn_v")], T(DType::kQ3_K));
    EXPECT_EQ(q2k[at(l, "ffn_down")], T(DType::kQ3_K));
    EXPECT_EQ(q2k[at(l, "attn_output")], T(DType::kQ3_K));
    EXPECT_EQ(q2k[at(l, "ffn_gate")], T(DType::kQ2_K));
    EXPECT_EQ(q6k[at(l, "ffn_down")], T(DType::kQ6_K));
    EXPECT_EQ(mxfp4[at(l, "ffn_down")], T(DType::kQ8_0));  // MXFP4 only for 3-D expert tensors
    EXPECT_EQ(q4km[at(l, "attn_norm")], T(DType::kF32));
  }
  for (auto* m : {&q4km, &q5km, &q4ks, &q3km, &q2k, &q6k}) {
    EXPECT_EQ((*m)["output.weight"], T(DType::kQ6_K));
  }
  EXPECT_EQ(mxfp4["output.weight"], T(DType::kQ8_0));
  EXPECT_EQ(q4km["token_embd.weight"], T(DType::kQ4_K));
  EXPECT_EQ(q3km["token_embd.weight"], T(DType::kQ3_K));
}

// Rows of 128 are not whole 256-blocks: Q4_K falls back to Q5_0, Q6_K to Q8_0 (as llama.cpp).
TEST(QuantizeTest, KQuantFallbacksForShortRows) {
  const std::string in = SharedPath("models/tiny/llama-f32.gguf");
  if (!testing::Exists(in)) GTEST_SKIP() << "missing " << in;
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  QuantizeOptions o;
  o.mix = "Q4_K_M";
  QuantizeStats stats;
  o.stats = &stats;
  ASSERT_TRUE(QuantizeModel(in, dir.File("k.gguf"), o).ok());
  EXPECT_GT(stats.n_fallback, 0);
  auto f = OpenOrDie(dir.File("k.gguf"));
  ASSERT_TRUE(f);
  EXPECT_EQ(T(f->FindTensor("blk.1.attn_q.weight")->type), T(DType::kQ5_0));
  EXPECT_EQ(T(f->FindTensor("output.weight")->type), T(DType::kQ8_0));
}

TEST(QuantizeTest, UnknownMixListsTheKnownOnes) {
  TempDir dir;
  QuantizeOptions o;
  o.mix = "Q7_Z";
  Status s = QuantizeModel("/nonexistent.gguf", dir.File("x.gguf"), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Q7_Z"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Q4_K_M"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("MXFP4"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace shoal
