// The fixture of the failover tests: in-process `shoal node` agents on loopback, a tiny
// synthesized model, the one-process reference run and a FailoverExecutor-backed engine.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/failover_executor.h"
#include "cluster/node_agent.h"
#include "cluster/wire.h"
#include "engine/engine.h"
#include "model/model.h"
#include "modelgen/synth.h"
#include "planner/model_profile.h"

namespace shoal::cluster::failover_test {

using Clock = std::chrono::steady_clock;
using Tokens = std::vector<std::vector<int32_t>>;  // [request] generated ids

inline constexpr int32_t kLayers = 6;  // up to 6 stages
inline constexpr int kMaxTokens = 40;  // generated per request: a few dozen steps after the fault
inline constexpr int kFaultStep = 8;   // after the prefill and a few decode steps
inline constexpr int64_t kDeadMs = 1000;  // the default dead time
// Each node's memory limit: the planner needs one; the 6-layer tiny model's stages take ~40 MiB.
inline constexpr uint64_t kNodeMem = uint64_t{256} << 20;

// Pings every 20 ms, suspect after 200 ms: loopback answers in well under a millisecond, a
// loaded 2-core CI machine within tens of milliseconds.
inline WatchConfig FastWatch() { return WatchConfig{20, 200, kDeadMs}; }

inline double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline net::ClusterKey TestKey() {
  std::vector<uint8_t> k(32);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(17 * i + 3);
  return *net::ClusterKey::FromBytes(k);
}

// A real `shoal node` agent serving on loopback until Kill (stopping it closes its links, as
// the kernel does for a killed process).
class LiveNode {
 public:
  LiveNode(const std::string& dir, const std::string& name) {
    NodeOptions o;
    o.port = 0;
    o.model_dir = dir;
    o.name = name;
    o.measure = false;
    o.mem_limit = kNodeMem;
    auto a = NodeAgent::Start(o, TestKey());
    EXPECT_TRUE(a.ok()) << a.status().message();
    agent_ = std::move(*a);
    address_ = "127.0.0.1:" + std::to_string(agent_->port());
    thread_ = std::thread([this] { (void)agent_->Run(); });
  }
  ~LiveNode() { Kill(); }
  void Kill() {
    if (!agent_) return;
    agent_->Stop();
    thread_.join();
    agent_.reset();
  }
  const std::string& address() const { return address_; }

 private:
  std::unique_ptr<NodeAgent> agent_;
  std::thread thread_;
  std::string address_;
};

// The greeting a node sends first on every link: its NodeInfo with test figures.
inline net::Frame JoinFrame(const std::string& name, const std::string& address) {
  measure::NodeInfo info;
  info.name = name;
  info.address = address;
  info.n_threads = 1;
  info.mem_limit = kNodeMem;
  info.mem_bw = 10e9;
  info.matmul_flops = {{DType::kQ4_0, 50e9}};
  net::Frame join;
  join.type = net::MsgType::kControl;
  join.payload = EncodeJoin(measure::NodeInfoToJson(info));
  return join;
}

class FailoverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/shoal-failover-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    SynthOptions so;
    so.preset = "tiny";
    so.type = DType::kQ8_0;
    so.seed = 5;
    so.n_layer = kLayers;
    so.n_threads = 1;
    const Status s = SynthesizeModel(so, *dir_ + "/m.gguf");
    ASSERT_TRUE(s.ok()) << s.message();
    auto f = gguf::File::Open(*dir_ + "/m.gguf");
    ASSERT_TRUE(f.ok()) << f.status().message();
    file_ = f->release();
    auto prof = planner::ProfileFromGguf(*file_);
    ASSERT_TRUE(prof.ok()) << prof.status().message();
    hp_ = new HParams(prof->hp);
    // The reference: one process, the whole model, no fault.
    auto model = Model::Load(*file_, LoadOptions{});
    ASSERT_TRUE(model.ok()) << model.status().message();
    auto engine = Engine::Create(model->get(), Config(), {});
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    want_ = new Tokens(RunAll(**engine));
  }
  static void TearDownTestSuite() {
    delete want_;
    delete hp_;
    delete file_;
    std::error_code ec;
    std::filesystem::remove_all(*dir_, ec);
    delete dir_;
  }

  static EngineConfig Config() {
    EngineConfig c;
    c.n_threads = 1;
    c.n_ctx = 256;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 256;
    return c;
  }

  // Two greedy and two seeded-sampling requests.
  static std::vector<Request> Requests() {
    std::vector<Request> out;
    for (int i = 0; i < 4; ++i) {
      Request r;
      r.prompt = {1, 20 + i, 300 + 7 * i, 45, 9, 1000 + i, 77};
      r.sampling.temperature = i % 2 == 0 ? 0.0f : 0.8f;
      r.sampling.seed = 100 + static_cast<uint64_t>(i);
      r.sampling.max_tokens = kMaxTokens;
      out.push_back(r);
    }
    return out;
  }

  // Runs Requests() to completion; at_step(k) runs before step k (faults, joins).
  static Tokens RunAll(Engine& e, const std::function<void(int)>& at_step = nullptr) {
    const std::vector<Request> reqs = Requests();
    std::map<int64_t, size_t> slot;
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto id = e.Add(reqs[i]);
      EXPECT_TRUE(id.ok()) << id.status().message();
      if (id.ok()) slot[*id] = i;
    }
    Tokens out(reqs.size());
    for (int step = 0; !e.idle() && step < 10'000; ++step) {
      if (at_step) at_step(step);
      auto ev = e.Step();
      EXPECT_TRUE(ev.ok()) << ev.status().message();
      if (!ev.ok()) break;
      for (const TokenEvent& t : *ev) out[slot.at(t.id)].push_back(t.token);
    }
    return out;
  }

  static FailoverOptions Options(std::vector<std::string> nodes,
                                 std::vector<std::string> standby = {}) {
    const EngineConfig c = Config();
    FailoverOptions fo;
    fo.cluster.nodes = std::move(nodes);
    fo.cluster.model_file = "m.gguf";
    fo.cluster.plan.max_num_seqs = c.max_num_seqs;
    fo.cluster.plan.max_model_len = c.n_ctx;
    fo.cluster.plan.block_size = c.block_size;
    fo.cluster.plan.kv_dtype = c.kv_dtype;
    fo.cluster.plan.max_batched_tokens = c.max_num_batched_tokens;
    fo.cluster.plan.link_dtype = planner::LinkDType::kF32;  // bit-exact hops
    fo.cluster.connect_timeout_ms = 5'000;
    fo.cluster.watch = FastWatch();
    fo.standby = std::move(standby);
    fo.retry_ms = 100;
    return fo;
  }

  // An engine over a FailoverExecutor (*fx: the executor it owns).
  static std::unique_ptr<Engine> ClusterEngine(const FailoverOptions& fo, FailoverExecutor** fx) {
    auto ex = FailoverExecutor::Create(fo, *file_, TestKey(), hp_->n_vocab, hp_->n_embd);
    EXPECT_TRUE(ex.ok()) << ex.status().message();
    if (!ex.ok()) return nullptr;
    *fx = ex->get();
    const int32_t blocks = static_cast<int32_t>(planner::KvTokensPerLayer(fo.cluster.plan) /
                                                fo.cluster.plan.block_size);
    return std::make_unique<Engine>(std::move(*ex), Config(), blocks, std::vector<int32_t>{});
  }

  inline static std::string* dir_ = nullptr;
  inline static gguf::File* file_ = nullptr;
  inline static HParams* hp_ = nullptr;
  inline static Tokens* want_ = nullptr;
};

inline const MemberState* Member(const FailoverStats& s, const std::string& address) {
  for (const MemberState& m : s.members)
    if (m.address == address) return &m;
  return nullptr;
}

}  // namespace shoal::cluster::failover_test
