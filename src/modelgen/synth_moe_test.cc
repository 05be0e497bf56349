// Tests for the MoE synth presets: llama.cpp's keys and tensor shapes, types, init, active share.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "base/test_support.h"
#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "modelgen/synth.h"

namespace shoal {
namespace {

using testing::TempDir;

const char* const kArchs[] = {"qwen3moe", "deepseek2", "kimi-k3"};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class SynthMoeArchTest : public ::testing::TestWithParam<const char*> {};

// The tiny preset has exactly the tensors (names, types, shapes) and "<arch>.*" keys (types and
// values) of the llama.cpp-checked file in ../shared/models/tiny.
TEST_P(SynthMoeArchTest, TinyMatchesSharedTinyModel) {
  const std::string arch = GetParam();
  const std::string ref_path = testing::SharedPath("models/tiny/" + arch + "-f32.gguf");
  if (!testing::Exists(ref_path)) GTEST_SKIP() << ref_path << " missing";
  TempDir dir;
  SynthOptions opt;
  opt.arch = arch;
  opt.preset = "tiny";
  const std::string path = dir.File("tiny.gguf");
  Status st = SynthesizeModel(opt, path);
  ASSERT_TRUE(st.ok()) << st.message();
  auto f = gguf::File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto ref = gguf::File::Open(ref_path);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  EXPECT_EQ((*f)->GetString("general.architecture").value(), arch);

  ASSERT_EQ((*f)->tensors().size(), (*ref)->tensors().size());
  for (const gguf::TensorInfo& r : (*ref)->tensors()) {
    const gguf::TensorInfo* t = (*f)->FindTensor(r.name);
    ASSERT_NE(t, nullptr) << r.name;
    EXPECT_EQ(t->type, r.type) << r.name;
    EXPECT_EQ(t->n_dims, r.n_dims) << r.name;
    for (int d = 0; d < 4; ++d) EXPECT_EQ(t->ne[d], r.ne[d]) << r.name << " dim " << d;
  }
  std::map<std::string, const gguf::Value*> keys, ref_keys;
  const std::string prefix = arch + ".";
  for (const auto& [k, v] : (*f)->metadata())
    if (k.rfind(prefix, 0) == 0) keys[k] = &v;
  for (const auto& [k, v] : (*ref)->metadata())
    if (k.rfind(prefix, 0) == 0) ref_keys[k] = &v;
  EXPECT_EQ(keys.size(), ref_keys.size());
  for (const auto& [k, v] : ref_keys) {
    auto it = keys.find(k);
    ASSERT_NE(it, keys.end()) << k;
    EXPECT_TRUE(*it->second == *v)
        << k << ": " << it->second->TypeString() << " " << it->second->ToString() << " vs "
        << v->TypeString() << " " << v->ToString();
  }
}

// Same seed -> byte-identical file; another seed -> other bytes of the same size.
TEST_P(SynthMoeArchTest, DeterministicPerSeed) {
  TempDir dir;
  SynthOptions opt;
  opt.arch = GetParam();
  opt.type = DType::kQ4_0;
  ASSERT_TRUE(SynthesizeModel(opt, dir.File("a.gguf")).ok());
  opt.n_threads = 1;
  ASSERT_TRUE(SynthesizeModel(opt, dir.File("b.gguf")).ok());
  opt.seed = 2;
  ASSERT_TRUE(SynthesizeModel(opt, dir.File("c.gguf")).ok());
  const std::string a = ReadAll(dir.File("a.gguf")), c = ReadAll(dir.File("c.gguf"));
  EXPECT_GT(a.size(), 100000u);
  EXPECT_EQ(a, ReadAll(dir.File("b.gguf")));
  EXPECT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

// small: 64 experts top-8, a few hundred MB in Q4_0, a decoded token uses < 1/3 of the weights.
TEST_P(SynthMoeArchTest, SmallIsSparse) {
  auto p = FindMoeSynthPreset(GetParam(), "small");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->n_expert, 64);
  EXPECT_EQ(p->n_expert_used, 8);
  auto tensors = MoeSynthTensorList(*p, DType::kQ4_0);
  ASSERT_TRUE(tensors.ok()) << tensors.status().message();
  int64_t total = 0, active = 0;
  uint64_t bytes = 0;
  for (const SynthTensor& t : *tensors) {
    const int64_t n = SynthTensorElements(t);
    total += n;
    bytes += *RowBytes(t.type, t.ne[0]) * static_cast<uint64_t>(n / t.ne[0]);
    if (t.name == "token_embd.weight") continue;
    const bool routed = t.name.find("_exps.") != std::string::npos;
    active += routed ? n / p->n_expert * p->n_expert_used : n;
    if (t.name.find("ffn_gate_inp") != std::string::npos || t.init == SynthTensor::Init::kNorm) {
      EXPECT_EQ(t.type, DType::kF32) << t.name;
    }
    if (t.name.find("ssm_conv1d") != std::string::npos) {
      EXPECT_EQ(t.type, DType::kF32) << t.name;
    }
  }
  EXPECT_GT(bytes, uint64_t{100} << 20);
  EXPECT_LT(bytes, uint64_t{600} << 20);
  EXPECT_LT(active * 3, total) << active << " of " << total;
}

INSTANTIATE_TEST_SUITE_P(Archs, SynthMoeArchTest, ::testing::ValuesIn(kArchs),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(SynthMoeTest, KimiInitRanges) {
  TempDir dir;
  SynthOptions opt;
  opt.arch = "kimi-k3";
  ASSERT_TRUE(SynthesizeModel(opt, dir.File("k.gguf")).ok());
  auto f = gguf::File::Open(dir.File("k.gguf"));
  ASSERT_TRUE(f.ok());
  const gguf::TensorInfo* a = (*f)->FindTensor("blk.0.ssm_a");
  ASSERT_NE(a, nullptr);
  const float* v = reinterpret_cast<const float*>(a->data);
  for (int64_t i = 0; i < a->n_elements(); ++i) {
    EXPECT_LE(v[i], -1.0f);
    EXPECT_GT(v[i], -16.0f);
  }
  EXPECT_NE(v[0], v[1]);
  // The router stays F32 in every type; expert tensors are 3-D.
  opt.type = DType::kQ8_0;
  ASSERT_TRUE(SynthesizeModel(opt, dir.File("q.gguf")).ok());
  auto q = gguf::File::Open(dir.File("q.gguf"));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ((*q)->FindTensor("blk.1.ffn_gate_inp.weight")->type, DType::kF32);
  EXPECT_EQ((*q)->FindTensor("blk.1.ffn_up_exps.weight")->type, DType::kQ8_0);
  EXPECT_EQ((*q)->FindTensor("blk.1.ffn_up_exps.weight")->n_dims, 3);
}

TEST(SynthMoeTest, UnknownPresetListsNames) {
  auto bad = FindMoeSynthPreset("deepseek2", "1b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("small"), std::string::npos);
  TempDir dir;
  SynthOptions opt;
  opt.arch = "qwen3moe";
  opt.preset = "7b";
  EXPECT_FALSE(SynthesizeModel(opt, dir.File("x.gguf")).ok());
}

}  // namespace
}  // namespace shoal
