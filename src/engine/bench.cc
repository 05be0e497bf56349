// pp/tg timing loops over Model::Forward with a private KV cache.
#include "engine/bench.h"

#include <chrono>
#include <cmath>
#include <random>

#include "kvcache/block_allocator.h"
#include "kvcache/kv_store.h"

namespace shoal {
namespace {

constexpr int32_t kBlock = 16;  // tokens per KV block (the engine's default)

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Summarize(BenchTest* t) {
  const double n = static_cast<double>(t->samples_ts.size());
  double sum = 0;
  for (double x : t->samples_ts) sum += x;
  t->avg_ts = sum / n;
  double var = 0;
  for (double x : t->samples_ts) var += (x - t->avg_ts) * (x - t->avg_ts);
  t->stddev_ts = n > 1 ? std::sqrt(var / (n - 1)) : 0.0;
}

}  // namespace

Result<std::vector<BenchTest>> RunBench(Model& model, ThreadPool& pool, const BenchOptions& o) {
  if (o.n_prompt < 0 || o.n_gen < 0 || o.reps < 1)
    return Errorf("bench needs -p >= 0, -n >= 0 and -r >= 1");
  const int32_t n_ctx = std::max(o.n_prompt, o.n_gen) + 1;
  const int32_t n_blocks = BlockTable::BlocksFor(n_ctx, kBlock);
  SHOAL_ASSIGN_OR_RETURN(KvStore kv,
                         KvStore::Create(model.MakeKvLayout(n_blocks, kBlock, o.kv_type, 1)));
  BlockAllocator alloc(n_blocks);
  BlockTable table;
  SHOAL_RETURN_IF_ERROR(table.Reserve(alloc, n_ctx, kBlock));
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> token(0,
                                               static_cast<int32_t>(model.hparams().n_vocab) - 1);
  ForwardOutput out;
  Batch b;

  // One prompt batch of n tokens at positions 0..n-1; logits of the last row only.
  auto run_pp = [&](int32_t n) -> Result<double> {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = token(rng);
    b.Clear();
    b.Add(0, ids, 0, table.blocks, true, false, TiledUntil(n), /*state_slot=*/0);
    const auto t0 = std::chrono::steady_clock::now();
    SHOAL_RETURN_IF_ERROR(model.Forward(b, nullptr, kv, &pool, &out));
    return static_cast<double>(n) / Seconds(t0);
  };
  // n decode steps of one token each, from an empty cache.
  auto run_tg = [&](int32_t n) -> Result<double> {
    const auto t0 = std::chrono::steady_clock::now();
    for (int32_t pos = 0; pos < n; ++pos) {
      const int32_t id = token(rng);
      b.Clear();
      b.Add(0, std::span<const int32_t>(&id, 1), pos, table.blocks, true, false, 0,
            /*state_slot=*/0);
      SHOAL_RETURN_IF_ERROR(model.Forward(b, nullptr, kv, &pool, &out));
    }
    return static_cast<double>(n) / Seconds(t0);
  };

  std::vector<BenchTest> tests;
  if (o.n_prompt > 0) {
    BenchTest t;
    t.n_prompt = o.n_prompt;
    if (o.warmup) SHOAL_RETURN_IF_ERROR(run_pp(o.n_prompt).status());
    for (int r = 0; r < o.reps; ++r) {
      SHOAL_ASSIGN_OR_RETURN(double ts, run_pp(o.n_prompt));
      t.samples_ts.push_back(ts);
    }
    Summarize(&t);
    tests.push_back(t);
  }
  if (o.n_gen > 0) {
    BenchTest t;
    t.n_gen = o.n_gen;
    if (o.warmup) SHOAL_RETURN_IF_ERROR(run_tg(std::min(o.n_gen, 16)).status());
    for (int r = 0; r < o.reps; ++r) {
      SHOAL_ASSIGN_OR_RETURN(double ts, run_tg(o.n_gen));
      t.samples_ts.push_back(ts);
    }
    Summarize(&t);
    tests.push_back(t);
  }
  return tests;
}

DecodeFootprint DecodeFootprintOf(const gguf::File& file, const HParams& hp) {
  DecodeFootprint fp;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const int64_t n = t.n_elements();
    fp.total_bytes += t.nbytes;
    fp.total_params += n;
    if (t.name == "token_embd.weight") {
      fp.active_bytes += t.row_bytes();  // one embedding row per token
      fp.active_params += t.ne[0];
      if (hp.tied_embeddings) {  // the output head reads the whole table
        fp.active_bytes += t.nbytes;
        fp.active_params += n;
      }
    } else if (hp.n_expert > 0 && t.name.find("_exps.") != std::string::npos &&
               t.ne[t.n_dims - 1] == hp.n_expert) {
      // Expert slices are contiguous whole rows: n_expert_used of n_expert are read.
      const uint64_t used = static_cast<uint64_t>(hp.n_expert_used);
      fp.active_bytes += t.nbytes / static_cast<uint64_t>(hp.n_expert) * used;
      fp.active_params += n / hp.n_expert * hp.n_expert_used;
    } else {
      fp.active_bytes += t.nbytes;
      fp.active_params += n;
    }
  }
  return fp;
}

uint64_t DecodeBytesPerToken(const gguf::File& file, const HParams& hp) {
  return DecodeFootprintOf(file, hp).active_bytes;
}

}  // namespace shoal
