// kimi-k3's per-sequence recurrent state through the Engine: prefix caching on gives the same
// tokens as off (hits resume from state snapshots), preemption by recompute rebuilds the state,
// forks copy it, slots are reused.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "base/test_support.h"
#include "engine/engine.h"
#include "golden_util.h"

namespace shoal {
namespace {

using Ids = std::vector<int32_t>;

// Runs every prompt (n choices each) to max_tokens and returns the ids per (request, choice).
std::vector<std::vector<Ids>> RunAll(Model* m, EngineConfig cfg, const std::vector<Ids>& prompts,
                                     int32_t n, int32_t max_tokens, bool sequential,
                                     int64_t* preemptions = nullptr) {
  cfg.n_threads = 2;
  auto engine = Engine::Create(m, cfg, {});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  std::vector<std::vector<Ids>> out(prompts.size(), std::vector<Ids>(static_cast<size_t>(n)));
  if (!engine.ok()) return out;
  std::map<int64_t, size_t> which;
  auto drain = [&] {
    while (!(*engine)->idle()) {
      auto ev = (*engine)->Step();
      EXPECT_TRUE(ev.ok()) << ev.status().message();
      if (!ev.ok()) return;
      for (const TokenEvent& e : *ev)
        out[which[e.id]][static_cast<size_t>(e.index)].push_back(e.token);
    }
  };
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.prompt = prompts[i];
    r.sampling.temperature = 0;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    r.n = n;
    auto id = (*engine)->Add(r);
    EXPECT_TRUE(id.ok()) << id.status().message();
    if (id.ok()) which[*id] = i;
    if (sequential) drain();
  }
  drain();
  if (preemptions) *preemptions = (*engine)->stats().preemptions_total;
  return out;
}

// What a run of sequential requests gives: per request the tokens, every step's logits and the
// prompt tokens the prefix cache served.
struct Outcome {
  std::vector<Ids> tokens;
  std::vector<std::vector<std::vector<float>>> logits;
  std::vector<int32_t> cached;
  int64_t prefix_hits = 0, preemptions = 0;
};

Outcome RunLogits(Model* m, EngineConfig cfg, const std::vector<Ids>& prompts, int32_t max_tokens,
                  bool sequential) {
  cfg.n_threads = 2;
  cfg.return_logits = true;
  Outcome o;
  auto engine = Engine::Create(m, cfg, {});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return o;
  o.tokens.resize(prompts.size());
  o.logits.resize(prompts.size());
  o.cached.resize(prompts.size());
  std::map<int64_t, size_t> which;
  auto drain = [&] {
    while (!(*engine)->idle()) {
      auto ev = (*engine)->Step();
      EXPECT_TRUE(ev.ok()) << ev.status().message();
      if (!ev.ok()) return;
      for (const TokenEvent& e : *ev) {
        const size_t i = which[e.id];
        if (o.tokens[i].empty()) o.cached[i] = (*engine)->CachedTokens(e.id);
        o.tokens[i].push_back(e.token);
        o.logits[i].push_back(e.logits);
      }
    }
  };
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.prompt = prompts[i];
    r.sampling.temperature = 0;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    auto id = (*engine)->Add(r);
    EXPECT_TRUE(id.ok()) << id.status().message();
    if (id.ok()) which[*id] = i;
    if (sequential) drain();
  }
  drain();
  o.prefix_hits = (*engine)->stats().prefix_hits_total;
  o.preemptions = (*engine)->stats().preemptions_total;
  return o;
}

class RecurrentStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::SharedPath("models/tiny/kimi-k3-f32.gguf");
    if (!testing::Exists(path)) GTEST_SKIP() << path << " missing";
    m_ = testing::Load(path, DType::kF32);
    ASSERT_NE(m_, nullptr);
    for (int i = 0; i < 6; ++i) {
      Ids p;
      for (int t = 0; t < 20 + 7 * i; ++t) p.push_back(1 + (t * 37 + i * 11) % 500);
      prompts_.push_back(p);
    }
  }
  std::unique_ptr<testing::LoadedModel> m_;
  std::vector<Ids> prompts_;
};

TEST_F(RecurrentStateTest, PrefixCachingOnMatchesOffAndSlotsAreReused) {
  EngineConfig off;
  off.enable_prefix_caching = false;
  off.max_num_seqs = 2;
  EngineConfig on = off;
  on.enable_prefix_caching = true;
  std::vector<Ids> twice = {prompts_[0], prompts_[0], prompts_[1], prompts_[1]};
  const auto a = RunAll(m_->model.get(), off, twice, 1, 8, true);
  const auto b = RunAll(m_->model.get(), on, twice, 1, 8, true);  // used to fail on a cache hit
  EXPECT_EQ(a, b);
  EXPECT_EQ(b[0], b[1]);
  EXPECT_EQ(b[2], b[3]);
  // 6 x 2 sequential requests through 2 state slots: every one finds a free slot again.
  std::vector<Ids> many;
  for (int r = 0; r < 2; ++r) many.insert(many.end(), prompts_.begin(), prompts_.end());
  const auto c = RunAll(m_->model.get(), on, many, 1, 4, true);
  for (size_t i = 0; i < prompts_.size(); ++i) {
    ASSERT_EQ(c[i][0].size(), 4u);
    EXPECT_EQ(c[i], c[i + prompts_.size()]);
  }
}

// Prompts of 100 and 110 tokens sharing their first 80, prefilled in 32-token chunks: the first
// leaves state snapshots at 32, 64 and 96; the second hits the cached blocks [0, 80) but resumes
// at 64, the last with a snapshot. Caching on and off see the same chunk ends (32, 64, 96), so
// tokens and logits must agree exactly.
std::vector<Ids> SharedPrefixPrompts(int n_prompts) {
  std::vector<Ids> out;
  Ids head;
  for (int t = 0; t < 80; ++t) head.push_back(1 + (t * 37) % 500);
  for (int i = 0; i < n_prompts; ++i) {
    Ids p = head;
    for (int t = 0; t < 20 + 10 * i; ++t) p.push_back(1 + (t * 53 + 7 * i + 3) % 500);
    out.push_back(p);
  }
  return out;
}

TEST_F(RecurrentStateTest, PrefixHitResumesFromAStateSnapshot) {
  const std::vector<Ids> prompts = SharedPrefixPrompts(2);
  EngineConfig off;
  off.enable_prefix_caching = false;
  off.max_num_seqs = 2;
  off.max_num_batched_tokens = 32;
  EngineConfig on = off;
  on.enable_prefix_caching = true;
  const Outcome a = RunLogits(m_->model.get(), off, prompts, 8, true);
  const Outcome b = RunLogits(m_->model.get(), on, prompts, 8, true);
  EXPECT_EQ(a.prefix_hits, 0);
  EXPECT_EQ(b.cached[0], 0);
  EXPECT_EQ(b.cached[1], 64);  // blocks [0, 80) cached, the snapshot is at 64
  EXPECT_EQ(b.prefix_hits, 64);
  ASSERT_EQ(b.tokens[1].size(), 8u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.logits, b.logits);  // bit-identical, every step
  // The same prompt again: served up to its last snapshot (96 of 110).
  const Outcome c = RunLogits(m_->model.get(), on, {prompts[1], prompts[1]}, 8, true);
  EXPECT_EQ(c.cached[1], 96);
  EXPECT_EQ(c.tokens[0], a.tokens[1]);
  EXPECT_EQ(c.tokens[1], a.tokens[1]);
  EXPECT_EQ(c.logits[1], a.logits[1]);
}

TEST_F(RecurrentStateTest, PrefixCachingWithRecomputePreemption) {
  const std::vector<Ids> prompts = SharedPrefixPrompts(4);  // 100..130 tokens, 80 shared
  EngineConfig ref;
  ref.enable_prefix_caching = false;
  ref.max_num_seqs = 4;
  ref.max_num_batched_tokens = 32;
  const Outcome a = RunLogits(m_->model.get(), ref, prompts, 24, false);
  EngineConfig tiny = ref;
  tiny.enable_prefix_caching = true;
  tiny.kv_blocks = 12;  // 192 tokens for 4 sequences growing to 124..154: preemption is certain
  tiny.n_ctx = 192;
  const Outcome b = RunLogits(m_->model.get(), tiny, prompts, 24, false);
  RecordProperty("preemptions", static_cast<int>(b.preemptions));
  RecordProperty("prefix_hits", static_cast<int>(b.prefix_hits));
  EXPECT_GT(b.preemptions, 0);
  EXPECT_GT(b.prefix_hits, 0);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.logits, b.logits);
}

TEST_F(RecurrentStateTest, PreemptionByRecomputeRebuildsTheState) {
  EngineConfig big;
  big.max_num_seqs = 6;
  const auto ref = RunAll(m_->model.get(), big, prompts_, 1, 40, false);
  EngineConfig tiny = big;
  tiny.kv_blocks = 8;  // 128 tokens for 6 sequences growing to 95: preemption is certain
  tiny.n_ctx = 128;
  tiny.swap_blocks = 32;  // ignored: a recurrent state is not swapped
  int64_t preemptions = 0;
  const auto got = RunAll(m_->model.get(), tiny, prompts_, 1, 40, false, &preemptions);
  EXPECT_GT(preemptions, 0);
  EXPECT_EQ(ref, got);
  // Each request alone gives the same tokens as all together.
  for (size_t i = 0; i < prompts_.size(); ++i)
    EXPECT_EQ(RunAll(m_->model.get(), big, {prompts_[i]}, 1, 40, false)[0], ref[i]) << i;
}

TEST_F(RecurrentStateTest, ForksCopyTheState) {
  EngineConfig cfg;
  cfg.max_num_seqs = 4;
  const auto one = RunAll(m_->model.get(), cfg, {prompts_[2]}, 1, 12, false);
  const auto three = RunAll(m_->model.get(), cfg, {prompts_[2]}, 3, 12, false);
  ASSERT_EQ(three[0].size(), 3u);
  for (const Ids& choice : three[0]) EXPECT_EQ(choice, one[0][0]);  // greedy: all equal
  // More choices than state slots is refused up front.
  EngineConfig small = cfg;
  small.max_num_seqs = 2;
  auto engine = Engine::Create(m_->model.get(), small, {});
  ASSERT_TRUE(engine.ok());
  Request r;
  r.prompt = prompts_[0];
  r.n = 3;
  EXPECT_FALSE((*engine)->Add(r).ok());
}

}  // namespace
}  // namespace shoal
