// Engine end to end on stories260K: batch invariance among 64 requests, preemption by recompute
// and by swap, prefix-cache hits, n > 1 forks, logprobs, cancellation and KV waste.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "base/check.h"
#include "golden_util.h"

namespace shoal::testing {
namespace {

const char kModel[] = "models/stories260K.gguf";

// What one request produced: per choice, its tokens and (with return_logits) logits per step.
struct Output {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<std::vector<float>>> logits;
  int32_t cached = 0;
};

struct RunStats {
  int64_t preemptions = 0;
  int32_t max_swapped = 0;
  double waste_sum = 0;
  int64_t waste_steps = 0;
  EngineStats last;
};

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (Exists(SharedPath(kModel))) model_ = Load(SharedPath(kModel), DType::kF16).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    if (!model_) GTEST_SKIP() << "no " << kModel;
  }

  static EngineConfig BaseConfig() {
    EngineConfig c;
    c.n_threads = 1;  // results never depend on threads; 1 avoids spinning on a busy CI box
    c.n_ctx = 512;
    c.max_num_seqs = 64;
    c.max_num_batched_tokens = 512;
    c.return_logits = true;
    return c;
  }

  // Runs the requests (all added before the first step) to completion.
  static std::vector<Output> RunAll(const EngineConfig& cfg, const std::vector<Request>& reqs,
                                    RunStats* st = nullptr) {
    auto engine = Engine::Create(model_->model.get(), cfg, {2});
    EXPECT_TRUE(engine.ok()) << engine.status().message();
    if (!engine.ok()) return {};
    std::vector<Output> out(reqs.size());
    std::map<int64_t, size_t> slot;
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto id = (*engine)->Add(reqs[i]);
      EXPECT_TRUE(id.ok()) << id.status().message();
      slot[*id] = i;
      out[i].tokens.resize(static_cast<size_t>(reqs[i].n));
      out[i].logits.resize(static_cast<size_t>(reqs[i].n));
    }
    while (!(*engine)->idle()) {
      auto ev = (*engine)->Step();
      EXPECT_TRUE(ev.ok()) << ev.status().message();
      if (!ev.ok()) break;
      for (auto& e : *ev) {
        Output& o = out[slot.at(e.id)];
        if (o.tokens[0].empty() && e.index == 0) o.cached = (*engine)->CachedTokens(e.id);
        o.tokens[static_cast<size_t>(e.index)].push_back(e.token);
        o.logits[static_cast<size_t>(e.index)].push_back(std::move(e.logits));
      }
      if (st) {
        const EngineStats s = (*engine)->stats();
        st->max_swapped = std::max(st->max_swapped, s.n_swapped);
        if (s.n_running > 0) {
          st->waste_sum += s.kv_waste;
          ++st->waste_steps;
        }
      }
    }
    if (st) {
      st->last = (*engine)->stats();
      st->preemptions = st->last.preemptions_total;
    }
    return out;
  }

  static std::vector<int32_t> Prompt(std::mt19937& rng, int32_t n) {
    std::uniform_int_distribution<int32_t> tok(3, 511);
    std::vector<int32_t> p{1};  // BOS
    while (static_cast<int32_t>(p.size()) < n) p.push_back(tok(rng));
    return p;
  }
  static Request Req(std::vector<int32_t> prompt, int max_tokens, float temperature,
                     uint64_t seed = 0) {
    Request r;
    r.prompt = std::move(prompt);
    r.sampling.temperature = temperature;
    r.sampling.seed = seed;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    return r;
  }
  // Greedy and seeded (temperature 0.8), short (one-chunk numerics) and long (tiled) prompts.
  static std::vector<Request> Targets() {
    std::mt19937 rng(7);
    return {Req(Prompt(rng, 37), 24, 0), Req(Prompt(rng, 37), 24, 0.8f, 1234),
            Req(Prompt(rng, 90), 24, 0), Req(Prompt(rng, 90), 24, 0.8f, 99)};
  }
  static void ExpectSame(const Output& a, const Output& b, const std::string& what) {
    ASSERT_EQ(a.tokens.size(), b.tokens.size()) << what;
    for (size_t c = 0; c < a.tokens.size(); ++c) {
      EXPECT_EQ(a.tokens[c], b.tokens[c]) << what << " choice " << c;
      ASSERT_EQ(a.logits[c].size(), b.logits[c].size()) << what;
      for (size_t s = 0; s < a.logits[c].size(); ++s)
        EXPECT_TRUE(a.logits[c][s] == b.logits[c][s]) << what << " choice " << c << " step " << s;
    }
  }
  static std::vector<Output> Alone(const EngineConfig& cfg, const std::vector<Request>& reqs) {
    std::vector<Output> out;
    for (const Request& r : reqs) out.push_back(RunAll(cfg, {r})[0]);
    return out;
  }

  static LoadedModel* model_;
};
LoadedModel* EngineTest::model_ = nullptr;

// A local executor that "loses a node" at the steps in `losses`: it throws its KV pool and swap
// space away (a fresh, zeroed pool), ignores submits until the loss is collected and reports it
// as KvLost, as a distributed executor does after re-planning over the survivors.
class LosingExecutor final : public Executor {
 public:
  LosingExecutor(Model* model, const EngineConfig& cfg, int32_t n_blocks, std::vector<int> losses)
      : model_(model), cfg_(cfg), n_blocks_(n_blocks), losses_(std::move(losses)) {
    Fresh();
  }
  int64_t n_vocab() const override { return inner_->n_vocab(); }
  Status Submit(const StepInput& in) override {
    if (lost_) return Status::Ok();
    if (std::find(losses_.begin(), losses_.end(), step_++) != losses_.end()) {
      Fresh();
      lost_ = KvLost{++epoch_, "node lost (test)"};
      return Status::Ok();
    }
    return inner_->Submit(in);
  }
  Status Collect(StepOutput* out) override {
    if (!lost_) return inner_->Collect(out);
    out->logits.clear();
    out->kv_lost = std::move(lost_);
    lost_.reset();
    return Status::Ok();
  }

 private:
  void Fresh() {
    auto st =
        Stage::Create(model_, {n_blocks_, cfg_.block_size, cfg_.kv_dtype, 0, cfg_.swap_blocks}, 1);
    SHOAL_CHECK(st.ok());
    inner_ = std::make_unique<LocalExecutor>(std::move(*st));
  }
  Model* model_;
  EngineConfig cfg_;
  int32_t n_blocks_;
  std::vector<int> losses_;
  std::unique_ptr<LocalExecutor> inner_;
  int step_ = 0;
  uint64_t epoch_ = 0;
  std::optional<KvLost> lost_;
};

TEST_F(EngineTest, SameTokensAloneOrAmong63Others) {
  const std::vector<Request> targets = Targets();
  EngineConfig cfg = BaseConfig();
  cfg.enable_prefix_caching = false;
  const std::vector<Output> alone = Alone(cfg, targets);
  std::mt19937 rng(11);
  std::vector<Request> all;
  std::uniform_int_distribution<int32_t> len(5, 150), gen(4, 40);
  for (int i = 0; i < 60; ++i)
    all.push_back(Req(Prompt(rng, len(rng)), gen(rng), i % 2 ? 0.8f : 0, i));
  std::vector<size_t> at;
  for (size_t t = 0; t < targets.size(); ++t) {
    at.push_back(15 * t + 3);
    all.insert(all.begin() + static_cast<std::ptrdiff_t>(at.back()), targets[t]);
  }
  ASSERT_EQ(all.size(), 64u);
  for (bool caching : {false, true}) {
    cfg.enable_prefix_caching = caching;
    const std::vector<Output> together = RunAll(cfg, all);
    for (size_t t = 0; t < targets.size(); ++t) {
      EXPECT_EQ(alone[t].tokens[0].size(), 24u);
      ExpectSame(alone[t], together[at[t]], "target " + std::to_string(t));
    }
  }
}

// A pool of 12 blocks for 8 sequences growing to ~110 tokens: preemption is certain.
std::vector<Request> Crowd() {
  std::mt19937 rng(5);
  std::vector<Request> r;
  for (int i = 0; i < 8; ++i) {
    Request q;
    std::uniform_int_distribution<int32_t> tok(3, 511);
    q.prompt = {1};
    for (int j = 0; j < 20 + 6 * i; ++j) q.prompt.push_back(tok(rng));
    q.sampling.temperature = i % 2 ? 0.8f : 0;
    q.sampling.seed = static_cast<uint64_t>(i);
    q.sampling.max_tokens = 60;
    q.sampling.ignore_eos = true;
    r.push_back(q);
  }
  r[7].n = 2;  // a fork among them
  return r;
}

// Lossless resume: losing every KV row at random steps (mid-prefill, mid-decode, twice in a
// row, with swapped sequences and a fork) gives exactly the tokens and logits of an undisturbed
// run, no token twice and none missing, because each sequence is recomputed from its tokens.
TEST_F(EngineTest, KvLossMidStreamGivesTheSameTokens) {
  const std::vector<Output> ref = RunAll(BaseConfig(), Crowd());
  for (int swap : {0, 16}) {
    EngineConfig cfg = BaseConfig();
    cfg.n_ctx = 128;
    cfg.kv_blocks = 12;  // preemption as well
    cfg.swap_blocks = swap;
    const int32_t n_blocks = 12;
    auto exec = std::make_unique<LosingExecutor>(model_->model.get(), cfg, n_blocks,
                                                 std::vector<int>{0, 3, 17, 18, 40, 77});
    Engine engine(std::move(exec), cfg, n_blocks, {2});
    std::vector<Request> reqs = Crowd();
    std::vector<Output> got(reqs.size());
    std::map<int64_t, size_t> slot;
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto id = engine.Add(reqs[i]);
      ASSERT_TRUE(id.ok()) << id.status().message();
      slot[*id] = i;
      got[i].tokens.resize(static_cast<size_t>(reqs[i].n));
      got[i].logits.resize(static_cast<size_t>(reqs[i].n));
    }
    for (int guard = 0; !engine.idle() && guard < 10000; ++guard) {
      auto ev = engine.Step();
      ASSERT_TRUE(ev.ok()) << ev.status().message();
      for (auto& e : *ev) {
        got[slot.at(e.id)].tokens[static_cast<size_t>(e.index)].push_back(e.token);
        got[slot.at(e.id)].logits[static_cast<size_t>(e.index)].push_back(std::move(e.logits));
      }
    }
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.kv_losses_total, 6);
    EXPECT_GT(st.replayed_tokens_total, 0);
    EXPECT_EQ(st.kv_usage, 0.0);
    for (size_t i = 0; i < ref.size(); ++i)
      ExpectSame(ref[i], got[i], "swap " + std::to_string(swap) + " request " + std::to_string(i));
  }
}

TEST_F(EngineTest, PreemptionByRecomputeGivesTheSameTokens) {
  EngineConfig big = BaseConfig();
  const std::vector<Output> ref = RunAll(big, Crowd());
  for (bool caching : {false, true}) {
    EngineConfig tiny = BaseConfig();
    tiny.n_ctx = 128;
    tiny.kv_blocks = 12;
    tiny.enable_prefix_caching = caching;
    RunStats st;
    const std::vector<Output> got = RunAll(tiny, Crowd(), &st);
    EXPECT_GT(st.preemptions, 0);
    EXPECT_EQ(st.max_swapped, 0);
    EXPECT_EQ(st.last.kv_usage, 0.0);
    for (size_t i = 0; i < ref.size(); ++i)
      ExpectSame(ref[i], got[i], "request " + std::to_string(i));
  }
}

// A request resumed elsewhere (server "resume": prompt + the tokens generated, `prompted` the
// first prompt's length) goes on with the original's logits, bit for bit (router_test covers a
// model with tiled paths, which this one has not).
TEST_F(EngineTest, ResumedRequestContinuesBitForBit) {
  std::mt19937 rng(11);
  const std::vector<int32_t> prompt = Prompt(rng, 8);
  const Output whole = RunAll(BaseConfig(), {Req(prompt, 90, 0.9f, 5)})[0];
  Request r = Req(prompt, 20, 0.9f, 5);
  r.prompt.insert(r.prompt.end(), whole.tokens[0].begin(), whole.tokens[0].begin() + 70);
  r.prompted = static_cast<int32_t>(prompt.size());
  const auto& w = whole.logits[0];
  EXPECT_EQ(RunAll(BaseConfig(), {r})[0].logits[0], std::vector(w.begin() + 70, w.end()));
}

TEST_F(EngineTest, PreemptionBySwapGivesTheSameTokens) {
  const std::vector<Output> ref = RunAll(BaseConfig(), Crowd());
  EngineConfig tiny = BaseConfig();
  tiny.n_ctx = 128;
  tiny.kv_blocks = 12;
  tiny.swap_blocks = 64;
  RunStats st;
  const std::vector<Output> got = RunAll(tiny, Crowd(), &st);
  EXPECT_GT(st.preemptions, 0);
  EXPECT_GT(st.max_swapped, 0);
  for (size_t i = 0; i < ref.size(); ++i)
    ExpectSame(ref[i], got[i], "request " + std::to_string(i));
}

// Requests run one after another on one engine: later ones hit the prefix cache and still give
// the tokens and logits of an engine with the cache off.
TEST_F(EngineTest, PrefixCacheHitsGiveIdenticalResults) {
  std::mt19937 rng(3);
  const std::vector<int32_t> lng = Prompt(rng, 100), shrt = Prompt(rng, 20);
  std::vector<Request> seq = {Req(lng, 16, 0), Req(lng, 16, 0.8f, 5), Req(shrt, 30, 0)};
  std::vector<int32_t> lng2 = lng;  // same 96-token prefix, other tail
  lng2.resize(97);
  lng2.push_back(17);
  seq.push_back(Req(lng2, 16, 0));
  EngineConfig off = BaseConfig();
  off.enable_prefix_caching = false;
  const std::vector<Output> ref = Alone(off, seq);
  // Multi-turn: the short prompt plus its first 29 generated tokens and a new tail (non-tiled).
  std::vector<int32_t> turn2 = shrt;
  turn2.insert(turn2.end(), ref[2].tokens[0].begin(), ref[2].tokens[0].begin() + 29);
  turn2.push_back(42);
  seq.push_back(Req(turn2, 8, 0));
  const Output ref_turn2 = RunAll(off, {seq.back()})[0];

  auto engine = Engine::Create(model_->model.get(), BaseConfig(), {2});
  ASSERT_TRUE(engine.ok());
  std::vector<Output> got;
  for (const Request& r : seq) {
    auto id = (*engine)->Add(r);
    ASSERT_TRUE(id.ok());
    Output o;
    o.tokens.resize(1);
    o.logits.resize(1);
    while (!(*engine)->idle()) {
      auto ev = (*engine)->Step();
      ASSERT_TRUE(ev.ok());
      for (auto& e : *ev) {
        if (o.tokens[0].empty()) o.cached = (*engine)->CachedTokens(e.id);
        o.tokens[0].push_back(e.token);
        o.logits[0].push_back(e.logits);
      }
    }
    got.push_back(o);
  }
  EXPECT_EQ(got[0].cached, 0);
  EXPECT_EQ(got[1].cached, 96);  // 6 full blocks, the last prompt token recomputed
  EXPECT_EQ(got[2].cached, 0);   // not tiled: other numerics, other hashes
  EXPECT_EQ(got[3].cached, 96);
  EXPECT_EQ(got[4].cached, 48);  // 20 + 29 computed tokens: 3 full blocks
  for (size_t i = 0; i < 4; ++i) ExpectSame(ref[i], got[i], "request " + std::to_string(i));
  ExpectSame(ref_turn2, got[4], "turn 2");
  const EngineStats s = (*engine)->stats();
  EXPECT_EQ(s.prefix_hits_total, 96 + 96 + 48);
  EXPECT_EQ(s.prefix_queries_total, 100 + 100 + 20 + 98 + 50);
  EXPECT_EQ(s.prompt_tokens_total, 100 + 100 + 20 + 98 + 50);
}

TEST_F(EngineTest, ForkedChoicesEqualSingleRunsWithShiftedSeeds) {
  std::mt19937 rng(9);
  for (int32_t len : {30, 70}) {  // partial last block (copy-on-write); a tiled prompt
    Request r = Req(Prompt(rng, len), 20, 0.8f, 77);
    r.n = 3;
    const Output forked = RunAll(BaseConfig(), {r})[0];
    ASSERT_EQ(forked.tokens.size(), 3u);
    for (int32_t i = 0; i < 3; ++i) {
      Request one = r;
      one.n = 1;
      one.sampling.seed = 77 + static_cast<uint64_t>(i);
      const Output single = RunAll(BaseConfig(), {one})[0];
      EXPECT_EQ(forked.tokens[static_cast<size_t>(i)].size(), 20u);
      EXPECT_EQ(forked.tokens[static_cast<size_t>(i)], single.tokens[0]) << "choice " << i;
      EXPECT_TRUE(forked.logits[static_cast<size_t>(i)] == single.logits[0]) << "choice " << i;
    }
    EXPECT_NE(forked.tokens[0], forked.tokens[1]);
  }
}

TEST_F(EngineTest, CancelChoiceStopsOneChoiceAndFreesItsBlocks) {
  std::mt19937 rng(11);
  Request r = Req(Prompt(rng, 40), 24, 0.8f, 5);
  r.n = 2;
  const Output both = RunAll(BaseConfig(), {r})[0];
  auto engine = Engine::Create(model_->model.get(), BaseConfig(), {2});
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  auto id = e.Add(r);
  ASSERT_TRUE(id.ok());
  std::vector<std::vector<int32_t>> got(2);
  bool cancelled = false;
  int32_t blocks_before = 0;
  while (!e.idle()) {
    auto ev = e.Step();
    ASSERT_TRUE(ev.ok());
    for (const TokenEvent& t : *ev) got[static_cast<size_t>(t.index)].push_back(t.token);
    if (!cancelled && got[1].size() == 3) {
      blocks_before = static_cast<int32_t>(e.stats().kv_usage * e.kv_blocks() + 0.5);
      e.CancelChoice(*id, 1);
      cancelled = true;
      EXPECT_TRUE(e.Has(*id));  // choice 0 goes on
      EXPECT_LT(static_cast<int32_t>(e.stats().kv_usage * e.kv_blocks() + 0.5), blocks_before);
    }
  }
  EXPECT_FALSE(e.Has(*id));
  EXPECT_EQ(got[1].size(), 3u);
  EXPECT_EQ(got[0], both.tokens[0]);  // the surviving choice is unchanged
}

TEST_F(EngineTest, LogprobsAreLogSoftmaxOfTheLogits) {
  std::mt19937 rng(4);
  auto engine = Engine::Create(model_->model.get(), BaseConfig(), {2});
  ASSERT_TRUE(engine.ok());
  Request r = Req(Prompt(rng, 12), 6, 0);
  r.logprobs = 5;
  ASSERT_TRUE((*engine)->Add(r).ok());
  int events = 0;
  while (!(*engine)->idle()) {
    auto ev = (*engine)->Step();
    ASSERT_TRUE(ev.ok());
    for (const TokenEvent& e : *ev) {
      ++events;
      double sum = 0, mx = -1e30;
      for (float x : e.logits) mx = std::max(mx, static_cast<double>(x));
      for (float x : e.logits) sum += std::exp(x - mx);
      const double lse = mx + std::log(sum);
      EXPECT_NEAR(e.logprob, e.logits[static_cast<size_t>(e.token)] - lse, 1e-5);
      ASSERT_EQ(e.top_logprobs.size(), 5u);
      EXPECT_EQ(e.top_logprobs[0].first, e.token);  // greedy
      EXPECT_FLOAT_EQ(e.top_logprobs[0].second, e.logprob);
      for (size_t i = 1; i < 5; ++i)
        EXPECT_LE(e.top_logprobs[i].second, e.top_logprobs[i - 1].second);
    }
  }
  EXPECT_EQ(events, 6);
}

TEST_F(EngineTest, RejectsBadRequests) {
  auto engine = Engine::Create(model_->model.get(), BaseConfig(), {2});
  ASSERT_TRUE(engine.ok());
  Request r = Req({1, 2, 3}, 4, 0);
  r.n = 0;
  EXPECT_FALSE((*engine)->Add(r).ok());
  r.n = 1;
  r.logprobs = 21;
  EXPECT_FALSE((*engine)->Add(r).ok());
  r.logprobs = -1;
  r.prompt = {1, 600};
  EXPECT_FALSE((*engine)->Add(r).ok());
  r.prompt.assign(513, 5);
  EXPECT_FALSE((*engine)->Add(r).ok());
  EngineConfig small = BaseConfig();
  small.kv_mem_bytes = 1000;  // less than one context's worth of blocks
  EXPECT_FALSE(Engine::Create(model_->model.get(), small, {2}).ok());
}

TEST_F(EngineTest, KvMemBytesSizesThePool) {
  EngineConfig c = BaseConfig();
  const uint64_t per_block =
      model_->model->MakeKvLayout(1, c.block_size, c.kv_dtype).BytesPerBlock();
  c.kv_mem_bytes = per_block * 100 + per_block / 2;
  auto engine = Engine::Create(model_->model.get(), c, {2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  EXPECT_EQ((*engine)->kv_blocks(), 100);
}

TEST_F(EngineTest, CancelFreesEveryChoiceAtOnce) {
  std::mt19937 rng(8);
  auto engine = Engine::Create(model_->model.get(), BaseConfig(), {2});
  ASSERT_TRUE(engine.ok());
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    Request r = Req(Prompt(rng, 40), 100, 0.8f, static_cast<uint64_t>(i));
    r.n = 3;
    ids.push_back(*(*engine)->Add(r));
  }
  for (int s = 0; s < 5; ++s) ASSERT_TRUE((*engine)->Step().ok());
  EXPECT_EQ((*engine)->stats().n_running, 12);
  EXPECT_GT((*engine)->stats().kv_usage, 0.0);
  for (int64_t id : ids) (*engine)->Cancel(id);
  EXPECT_TRUE((*engine)->idle());
  EXPECT_EQ((*engine)->stats().kv_usage, 0.0);
  EXPECT_EQ((*engine)->stats().n_running, 0);
}

// Prompts of 150-400 tokens and 64 generated tokens: blocks are reserved only for computed
// tokens, so the waste is the partial last blocks, < 4% on average.
TEST_F(EngineTest, KvWasteStaysUnderFourPercent) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int32_t> len(150, 400);
  std::vector<Request> reqs;
  for (int i = 0; i < 32; ++i) reqs.push_back(Req(Prompt(rng, len(rng)), 64, 0.8f, i));
  EngineConfig c = BaseConfig();
  c.return_logits = false;
  RunStats st;
  RunAll(c, reqs, &st);
  ASSERT_GT(st.waste_steps, 0);
  const double mean = st.waste_sum / static_cast<double>(st.waste_steps);
  std::fprintf(stderr, "mean KV waste %.4f over %lld steps\n", mean,
               static_cast<long long>(st.waste_steps));
  EXPECT_LT(mean, 0.04);
  EXPECT_GT(mean, 0.0);
  EXPECT_EQ(st.last.generation_tokens_total, 32 * 64);
}

}  // namespace
}  // namespace shoal::testing

namespace shoal::testing {
namespace {

// Runs requests one after another on one engine; returns per request its tokens and logits.
std::vector<std::pair<int32_t, std::vector<std::vector<float>>>> Sequential(
    Model* model, bool caching, const std::vector<Request>& reqs, std::vector<int32_t>* cached) {
  EngineConfig c;
  c.n_threads = 1;
  c.n_ctx = 256;
  c.return_logits = true;
  c.enable_prefix_caching = caching;
  auto engine = Engine::Create(model, c, {});
  EXPECT_TRUE(engine.ok());
  std::vector<std::pair<int32_t, std::vector<std::vector<float>>>> out;
  for (const Request& r : reqs) {
    EXPECT_TRUE((*engine)->Add(r).ok());
    out.emplace_back();
    while (!(*engine)->idle()) {
      auto ev = (*engine)->Step();
      EXPECT_TRUE(ev.ok());
      for (auto& e : *ev) {
        if (out.back().second.empty() && cached) cached->push_back((*engine)->CachedTokens(e.id));
        out.back().second.push_back(e.logits);
      }
    }
  }
  return out;
}

// A model whose value width takes llama.cpp's tiled attention numerics: a prompt's KV rows
// differ in the last bits between tiled (>= 64-token prompt) and one-chunk positions. Prefix
// hits must still be bit-identical to recomputation: a non-tiled prompt must not reuse a tiled
// prompt's blocks, nor a tiled prompt the blocks of another's generated tokens.
TEST(EngineTiledPrefix, HitsAreBitIdenticalWhereTheNumericsDiffer) {
  const std::string path = SharedPath("models/tiny-dense256-random-q8_0.gguf");
  if (!Exists(path)) GTEST_SKIP();
  auto m = Load(path, DType::kF16);
  ASSERT_TRUE(m);
  const int32_t n_vocab = static_cast<int32_t>(m->model->hparams().n_vocab);
  std::mt19937 rng(21);
  std::uniform_int_distribution<int32_t> tok(3, n_vocab - 1);
  std::vector<int32_t> a(80);
  for (int32_t& t : a) t = tok(rng);
  auto req = [](std::vector<int32_t> p) {
    Request r;
    r.prompt = std::move(p);
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 24;
    r.sampling.ignore_eos = true;
    return r;
  };
  std::vector<Request> reqs = {req(a)};
  std::vector<int32_t> cached_off;
  const auto first = Sequential(m->model.get(), false, reqs, nullptr);
  // b: a + its first 20 generated tokens + one more (tiled, 101 tokens); c: a's first 40 + one
  // (not tiled).
  std::vector<int32_t> b = a;
  for (int i = 0; i < 20; ++i)
    b.push_back(static_cast<int32_t>(
        std::max_element(first[0].second[i].begin(), first[0].second[i].end()) -
        first[0].second[i].begin()));
  b.push_back(5);
  std::vector<int32_t> c(a.begin(), a.begin() + 40);
  c.push_back(6);
  reqs.push_back(req(b));
  reqs.push_back(req(c));
  reqs.push_back(req(a));
  std::vector<int32_t> cached;
  const auto off = Sequential(m->model.get(), false, reqs, nullptr);
  const auto on = Sequential(m->model.get(), true, reqs, &cached);
  ASSERT_EQ(cached.size(), 4u);
  EXPECT_EQ(cached[1], 80);  // a's prompt blocks only, not those holding its generated tokens
  EXPECT_EQ(cached[2], 0);   // other numerics
  EXPECT_EQ(cached[3], 64);  // never the last prompt token
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(off[i].second.size(), on[i].second.size());
    for (size_t s = 0; s < on[i].second.size(); ++s)
      EXPECT_TRUE(off[i].second[s] == on[i].second[s]) << "request " << i << " step " << s;
  }
}

}  // namespace
}  // namespace shoal::testing
