// Exact tensor parallelism (model/tensor_parallel.h) against one process, bit for bit: every
// llama-family, deepseek2 and kimi-k3 tiny model split over 2, 3 and 4 in-process members on
// authenticated loopback links (a prompt step of two sequences with every row's logits, then
// greedy decode steps); fast mode reproducible and close to one process; and a member that stops
// mid-step fails its peers' step within the group's timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "collective/group.h"
#include "collective/mesh.h"
#include "collective/tp_comm.h"
#include "engine/stage.h"
#include "gguf/gguf.h"
#include "golden_util.h"
#include "model/model.h"

namespace shoal::testing {
namespace {

net::ClusterKey Key() { return *net::ClusterKey::FromBytes(std::vector<uint8_t>(32, 0x3c)); }

// One process's model and KV (a member when tp.size > 1).
struct Runner {
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Stage> stage;
  std::unique_ptr<collective::Group> group;
  std::unique_ptr<collective::GroupTpComm> comm;
  ForwardOutput out;
};

std::unique_ptr<Runner> Open(const std::string& path, TpShard tp) {
  auto r = std::make_unique<Runner>();
  auto f = gguf::File::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  if (!f.ok()) return nullptr;
  r->file = std::move(*f);
  LoadOptions opt;
  opt.tp = tp;
  auto m = Model::Load(*r->file, opt);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return nullptr;
  r->model = std::move(*m);
  auto st = Stage::Create(r->model.get(), {16, 16, DType::kF16, 2, 0}, 1);  // 2 state slots
  EXPECT_TRUE(st.ok()) << st.status().message();
  if (!st.ok()) return nullptr;
  r->stage = std::move(*st);
  return r;
}

// A group of `t` members on one mesh, each with its own file mapping.
std::vector<std::unique_ptr<Runner>> OpenGroup(const std::string& path, int t,
                                               int64_t timeout_ms = 5'000, bool fast = false) {
  std::vector<std::unique_ptr<Runner>> g;
  auto mesh = collective::LoopbackMesh(t, Key());
  EXPECT_TRUE(mesh.ok()) << mesh.status().message();
  if (!mesh.ok()) return g;
  for (int k = 0; k < t; ++k) {
    auto r = Open(path, TpShard{k, t, fast});
    if (!r) return {};
    r->group = std::make_unique<collective::Group>(k, (*mesh)[static_cast<size_t>(k)], timeout_ms);
    r->comm = std::make_unique<collective::GroupTpComm>(r->group.get());
    r->model->SetTpComm(r->comm.get());
    g.push_back(std::move(r));
  }
  return g;
}

// Runs the batch on every member at once (each on its own thread, as nodes would).
std::vector<Status> ForwardAll(std::vector<std::unique_ptr<Runner>>& g, const Batch& b) {
  std::vector<Status> st(g.size());
  std::vector<std::thread> th;
  for (size_t k = 0; k < g.size(); ++k)
    th.emplace_back([&, k] { st[k] = g[k]->stage->Forward(b, nullptr, &g[k]->out); });
  for (std::thread& t : th) t.join();
  return st;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

int32_t Argmax(const float* p, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (p[i] > p[best]) best = i;
  return static_cast<int32_t>(best);
}

// A prompt step of two sequences (a 21-token and a 6-token prompt, every row's logits), then 6
// greedy decode steps, on `ref` and the group at once; check(step) compares their logits.
template <typename Check>
void Drive(Runner& ref, std::vector<std::unique_ptr<Runner>>& g, Check check) {
  const int64_t V = ref.model->hparams().n_vocab;
  std::vector<int32_t> a, c;
  for (int i = 0; i < 21; ++i) a.push_back((i * 37 + 11) % static_cast<int32_t>(V));
  for (int i = 0; i < 6; ++i) c.push_back((i * 53 + 5) % static_cast<int32_t>(V));
  const std::vector<int32_t> ta = {0, 1}, tc = {2, 3};
  int32_t pa = 0, pc = 0;
  for (int step = 0; step < 7; ++step) {
    Batch b;
    b.Add(1, a, pa, ta, true, step == 0, 0, 0);  // state slots 0 and 1 (recurrent models)
    b.Add(2, c, pc, tc, true, step == 0, 0, 1);
    ASSERT_TRUE(ref.stage->Forward(b, nullptr, &ref.out).ok());
    for (const Status& s : ForwardAll(g, b)) ASSERT_TRUE(s.ok()) << s.message();
    check(step);
    pa += static_cast<int32_t>(a.size());
    pc += static_cast<int32_t>(c.size());
    const size_t rows = ref.out.logits.size() / static_cast<size_t>(V);
    a = {Argmax(ref.out.logits.data() + (step == 0 ? 20 : 0) * V, V)};
    c = {Argmax(ref.out.logits.data() + (rows - 1) * V, V)};
  }
}

class ExactTp : public ::testing::TestWithParam<const char*> {};

TEST_P(ExactTp, LogitsEqualOneProcess) {
  const std::string path = SharedPath(GetParam());
  if (!Exists(path)) GTEST_SKIP() << "no " << path;
  auto ref = Open(path, {});
  ASSERT_TRUE(ref);
  for (int t : {2, 3, 4}) {
    SCOPED_TRACE("members " + std::to_string(t));
    auto g = OpenGroup(path, t);
    ASSERT_EQ(g.size(), static_cast<size_t>(t));
    Drive(*ref, g, [&](int step) {
      for (int k = 0; k < t; ++k)
        ASSERT_TRUE(SameBits(ref->out.logits, g[static_cast<size_t>(k)]->out.logits))
            << "member " << k << " step " << step;
    });
  }
}

// Fast mode: partial sums added in member order. Every member gets the same bits, a second
// group gets them again, and they stay within float rounding of one process.
// A MoE model's router can pick another expert for a row whose hidden state moved by rounding,
// which moves its output further: 5% of the largest logit there, 0.1% for dense models.
struct FastCase {
  const char* path;
  float tolerance;
};
class FastTp : public ::testing::TestWithParam<FastCase> {};

TEST_P(FastTp, DeterministicAndCloseToOneProcess) {
  const std::string path = SharedPath(GetParam().path);
  if (!Exists(path)) GTEST_SKIP() << "no " << path;
  auto ref = Open(path, {});
  ASSERT_TRUE(ref);
  for (int t : {2, 3, 4}) {
    SCOPED_TRACE("members " + std::to_string(t));
    auto g = OpenGroup(path, t, 5'000, /*fast=*/true);
    auto again = OpenGroup(path, t, 5'000, /*fast=*/true);
    ASSERT_EQ(g.size(), static_cast<size_t>(t));
    ASSERT_EQ(again.size(), static_cast<size_t>(t));
    std::vector<std::vector<float>> first;
    Drive(*ref, g, [&](int step) {
      for (int k = 1; k < t; ++k)
        ASSERT_TRUE(SameBits(g[0]->out.logits, g[static_cast<size_t>(k)]->out.logits));
      float worst = 0, scale = 1e-6f;
      for (size_t i = 0; i < ref->out.logits.size(); ++i) {
        worst = std::max(worst, std::abs(ref->out.logits[i] - g[0]->out.logits[i]));
        scale = std::max(scale, std::abs(ref->out.logits[i]));
      }
      EXPECT_LT(worst, GetParam().tolerance * scale) << "step " << step;
      first.push_back(g[0]->out.logits);
    });
    size_t step = 0;
    Drive(*ref, again, [&](int) {
      ASSERT_TRUE(SameBits(first[step++], again[0]->out.logits));  // run to run
    });
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, FastTp,
                         ::testing::Values(FastCase{"models/stories260K.gguf", 1e-3f},
                                           FastCase{"models/tiny/llama-f32.gguf", 1e-3f},
                                           FastCase{"models/tiny/llama-q8_0.gguf", 1e-3f},
                                           FastCase{"models/tiny/qwen3-q8_0.gguf", 1e-3f},
                                           FastCase{"models/tiny/qwen3moe-q8_0.gguf", 5e-2f}));

INSTANTIATE_TEST_SUITE_P(
    TinyModels, ExactTp,
    ::testing::Values("models/stories260K.gguf", "models/tiny/llama-f32.gguf",
                      "models/tiny/llama-q4_0.gguf", "models/tiny/llama-q8_0.gguf",
                      "models/tiny/qwen3-f32.gguf", "models/tiny/qwen3-q4_0.gguf",
                      "models/tiny/qwen3-q8_0.gguf", "models/tiny/qwen3moe-f32.gguf",
                      "models/tiny/qwen3moe-q4_0.gguf", "models/tiny/qwen3moe-q8_0.gguf",
                      "models/tiny-moe-random-f32.gguf", "models/tiny-dense256-random-q4_k_m.gguf",
                      "models/tiny-dense256-random-q4_0.gguf", "models/tiny/deepseek2-f32.gguf",
                      "models/tiny/deepseek2-q4_0.gguf", "models/tiny/deepseek2-q8_0.gguf",
                      "models/tiny/kimi-k3-f32.gguf", "models/tiny/kimi-k3-q4_0.gguf",
                      "models/tiny/kimi-k3-q8_0.gguf"));

// A member that never joins the step (stopped, or its machine gone): the others' Forward fails
// within the group's timeout instead of hanging, and the group is unusable afterwards.
TEST(ExactTpFaults, SilentMemberFailsTheStep) {
  const std::string path = SharedPath("models/stories260K.gguf");
  if (!Exists(path)) GTEST_SKIP() << "no " << path;
  auto g = OpenGroup(path, 3, 800);
  ASSERT_EQ(g.size(), 3u);
  const std::vector<int32_t> ids = {1, 2, 3, 4}, table = {0};
  Batch b;
  b.Add(1, ids, 0, table, true);
  std::vector<std::unique_ptr<Runner>> alive;
  alive.push_back(std::move(g[0]));
  alive.push_back(std::move(g[1]));
  const auto t0 = std::chrono::steady_clock::now();
  for (const Status& s : ForwardAll(alive, b)) EXPECT_FALSE(s.ok());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 5.0);
  EXPECT_TRUE(alive[0]->group->failed());
  // Unsplit models refuse to run without a group, and split ones of other architectures load not.
  auto lone = Open(path, TpShard{0, 2});
  ASSERT_TRUE(lone);
  EXPECT_FALSE(lone->stage->Forward(b, nullptr, &lone->out).ok());
  for (const char* m : {"models/tiny/deepseek2-q8_0.gguf", "models/tiny/kimi-k3-q4_0.gguf"}) {
    const std::string p = SharedPath(m);  // MLA models split exactly, not the fast way
    if (!Exists(p)) continue;
    auto f = gguf::File::Open(p);
    ASSERT_TRUE(f.ok());
    LoadOptions opt;
    opt.tp = {0, 2, /*fast=*/true};
    EXPECT_FALSE(Model::Load(**f, opt).ok()) << m;
    opt.tp.fast = false;
    EXPECT_TRUE(Model::Load(**f, opt).ok()) << m;
  }
}

}  // namespace
}  // namespace shoal::testing
