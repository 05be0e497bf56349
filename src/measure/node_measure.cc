// MeasureNode: what a node reports to the planner: STREAM-triad bandwidth, the rate decode
// streams weights through the matmul kernels, matmul speed per weight type, and the speed of
// the cached-attention kernel.
#include "measure/node_measure.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "io/mapped_file.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "threading/membw.h"
#include "threading/thread_pool.h"

namespace shoal::measure {

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The types of the model zoo's files: Q4_0/Q8_0/F16 layers, K-quant mixes (Q4_K_M's Q6_K
// output head and FFN down matrices), MXFP4 experts.
constexpr DType kTypes[] = {DType::kQ4_0, DType::kQ8_0, DType::kF16,  DType::kQ4_K,
                            DType::kQ5_K, DType::kQ6_K, DType::kMXFP4};

// The typical pass, not the luckiest: a node computes for seconds at a time.
double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double MatMulFlops(DType t, ThreadPool* pool) {
  // [1024, 2048] weights x 32 tokens (a prompt chunk's shape, ~3 ms a pass at 45 GFLOPS), median
  // of 7: small enough (1.1 MiB of Q4_0) for any node's budget; cache-resident, so compute
  // speed. The best of 5 passes of 8 tokens (~0.7 ms) read 39-56 GFLOPS from one measurement to
  // the next on a 2-core AVX2 VM and priced prefill 25% faster than it ran (1.05 s against 1.40
  // s for 73 prompt tokens of an 8-layer 1B-wide model).
  const int64_t rows = 1024, cols = 2048, tokens = 32;
  std::vector<uint8_t> w(*RowBytes(t, cols) * rows, 0);
  std::vector<float> x(static_cast<size_t>(tokens * cols), 0.5f), y(tokens * rows);
  kernels::MatrixView mv{t, rows, cols, w.data(), *RowBytes(t, cols)};
  // As the model holds it (LoadOptions::pretile lays out Q4_0 matrices for the tiled kernels).
  std::vector<uint8_t> tiled;
  if (kernels::CanPretile(mv)) {
    tiled.resize(w.size());
    mv = kernels::Pretile(mv, tiled.data(), nullptr);
  }
  kernels::MatMulScratch scratch;
  kernels::MatMul(mv, x.data(), cols, tokens, y.data(), rows, pool, &scratch);  // warm-up
  std::vector<double> times;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::MatMul(mv, x.data(), cols, tokens, y.data(), rows, pool, &scratch);
    times.push_back(Seconds(t0));
  }
  return 2.0 * rows * cols * tokens / std::max(Median(times), 1e-9);
}

// The matrices of one weight-streaming round: one decoder layer's dense matrices as [rows,
// cols] (attention q, k, v, output; FFN gate, up, down), in the order decode reads them,
// repeated until a round holds 64 MiB: twice the 32 MiB L3 of the largest CPU here, so each
// round reads DRAM, as a decode token does. The shapes matter: on a Zen 4 VM, 4096-wide Q4_0
// matrices streamed at ~26 GB/s and the 2048- and 5632-wide ones of a 1B-wide model at ~19,
// the rate its decode reached.
class StreamSet {
 public:
  StreamSet(const MeasureShape& shape, DType type, ThreadPool* pool) {
    const int64_t e = std::max<int64_t>(shape.n_embd, 32), ff = std::max<int64_t>(shape.n_ff, 32);
    const int64_t q = std::max<int64_t>(shape.q_rows, 32);
    const int64_t kv = std::max<int64_t>(shape.kv_rows, 32);
    const std::pair<int64_t, int64_t> layer[] = {{q, e},  {kv, e}, {kv, e}, {e, q},
                                                 {ff, e}, {ff, e}, {e, ff}};
    // At most 16 MiB a matrix (rows cut in multiples of 64), so that a round of a large model's
    // layer stays near 64-80 MiB for a 256 MiB node.
    constexpr uint64_t kRoundBytes = uint64_t{64} << 20, kMatrixCap = uint64_t{16} << 20;
    std::vector<kernels::MatrixView> shapes;
    uint64_t largest = 0;
    for (size_t i = 0; total_ < kRoundBytes; i = (i + 1) % std::size(layer)) {
      const int64_t cols = (layer[i].second + 255) / 256 * 256;  // whole blocks of any type
      const uint64_t row_bytes = RowBytes(type, cols).value_or(0);
      if (row_bytes == 0) return;
      int64_t rows = layer[i].first;
      if (row_bytes * static_cast<uint64_t>(rows) > kMatrixCap)
        rows = std::max<int64_t>(64, static_cast<int64_t>(kMatrixCap / row_bytes) / 64 * 64);
      shapes.push_back({type, rows, cols, nullptr, row_bytes});
      total_ += row_bytes * static_cast<uint64_t>(rows);
      largest = std::max(largest, row_bytes * static_cast<uint64_t>(rows));
    }
    // Laid out as the model holds them, from one zero source matrix (the kernels' speed does
    // not depend on the values).
    std::vector<uint8_t> src(largest, 0);
    Result<uint8_t*> mem = MapAnonymousHuge(total_, "weight-stream measurement");
    if (!mem.ok()) return;
    mem_ = *mem;
    uint8_t* dst = mem_;
    for (kernels::MatrixView v : shapes) {
      const uint64_t bytes = v.row_bytes * static_cast<uint64_t>(v.rows);
      v.data = src.data();
      if (kernels::CanPretile(v)) {
        views_.push_back(kernels::Pretile(v, dst, pool));
      } else {
        std::copy(src.begin(), src.begin() + static_cast<ptrdiff_t>(bytes), dst);
        views_.push_back({v.type, v.rows, v.cols, dst, v.row_bytes});
      }
      dst += bytes;
      max_rows_ = std::max(max_rows_, v.rows);
      max_cols_ = std::max(max_cols_, v.cols);
    }
  }
  ~StreamSet() {
    if (mem_ != nullptr) ::munmap(mem_, total_);
  }
  StreamSet(const StreamSet&) = delete;
  StreamSet& operator=(const StreamSet&) = delete;

  bool ok() const { return mem_ != nullptr; }
  uint64_t bytes() const { return total_; }

  // The seconds of each of `rounds` passes over every matrix at `tokens` tokens, after one
  // untimed pass.
  std::vector<double> Rounds(int64_t tokens, int rounds, ThreadPool* pool) {
    std::vector<double> times;
    for (int r = 0; r <= rounds; ++r) {
      const double t = Pass(tokens, pool);
      if (r > 0) times.push_back(t);
    }
    return times;
  }

  // The seconds of one pass over every matrix at `tokens` tokens.
  double Pass(int64_t tokens, ThreadPool* pool) {
    std::vector<float> x(static_cast<size_t>(tokens * max_cols_), 0.5f), y(tokens * max_rows_);
    const auto t0 = std::chrono::steady_clock::now();
    for (const kernels::MatrixView& v : views_)
      kernels::MatMul(v, x.data(), v.cols, tokens, y.data(), v.rows, pool, &scratch_);
    return Seconds(t0);
  }

 private:
  std::vector<kernels::MatrixView> views_;
  kernels::MatMulScratch scratch_;
  uint8_t* mem_ = nullptr;
  uint64_t total_ = 0;
  int64_t max_rows_ = 0, max_cols_ = 0;
};

}  // namespace

namespace {

// The median of 15 rounds (each ~4 ms at 16 GB/s): decode streams for seconds, so the typical
// round, not the luckiest, is its rate (on this shared host the best of 15 read 15-24 GB/s from
// one run to the next and ran ~30% ahead of served decode).
double StreamRate(StreamSet& set, int64_t tokens, ThreadPool* pool) {
  return static_cast<double>(set.bytes()) / std::max(Median(set.Rounds(tokens, 15, pool)), 1e-9);
}

// NodeInfo's table for `type`: the rate at 1, 2, 4 and 8 tokens over one laid-out set (empty
// when the memory cannot be mapped or the type has no whole row at these widths). The batch
// sizes take turns, one round each, 15 times over (~0.35 s): this host's rate moved between
// modes within a second, and measured one after another (15 rounds at 1 token, then 15 at 2)
// the 2-token figure read 0.37-1.5x the 1-token one across 40 measurements, so a table mixed
// moments; taking turns puts every entry in the same moments.
std::vector<double> StreamTable(const MeasureShape& shape, DType type, ThreadPool* pool) {
  StreamSet set(shape, type, pool);
  std::vector<double> table;
  if (!set.ok()) return table;
  constexpr int64_t kTokens[] = {1, 2, 4, 8};
  constexpr int kRounds = 15;
  std::vector<std::vector<double>> times(std::size(kTokens));
  for (int64_t tokens : kTokens) set.Pass(tokens, pool);  // warm-up
  for (int r = 0; r < kRounds; ++r)
    for (size_t i = 0; i < std::size(kTokens); ++i) times[i].push_back(set.Pass(kTokens[i], pool));
  for (const std::vector<double>& t : times)
    table.push_back(static_cast<double>(set.bytes()) / std::max(Median(t), 1e-9));
  return table;
}

}  // namespace

double MeasureWeightStream(ThreadPool* pool, int64_t tokens, const MeasureShape& shape,
                           DType type) {
  StreamSet set(shape, type, pool);
  return set.ok() ? StreamRate(set, tokens, pool) : 0;
}

std::vector<double> MeasureCoRunSlowdown(const MeasureShape& shape, int cores) {
  std::vector<double> slowdown;
  if (cores < 2) return slowdown;
  // One single-threaded stream set per core, each its own memory.
  std::vector<std::unique_ptr<StreamSet>> sets(static_cast<size_t>(cores));
  for (auto& set : sets) {
    set = std::make_unique<StreamSet>(shape, DType::kQ4_0, nullptr);
    if (!set->ok()) return slowdown;
  }
  // Alone and together in turns, every batch size in every turn, 12 turns (~0.6 s): this host's
  // bandwidth moved between modes within a second, and phases of 8 rounds a batch size one
  // after another read 1.0-1.9 for the same figure from one measurement to the next.
  constexpr int64_t kTokens[] = {1, 2, 4, 8};
  constexpr int kTurns = 12, kTogether = 2;  // passes per thread while all run
  std::vector<std::vector<double>> alone(std::size(kTokens)), together(std::size(kTokens));
  for (int64_t tokens : kTokens) sets[0]->Pass(tokens, nullptr);  // warm-up
  for (int turn = 0; turn < kTurns; ++turn) {
    for (size_t i = 0; i < std::size(kTokens); ++i) {
      alone[i].push_back(sets[0]->Pass(kTokens[i], nullptr));
      std::atomic<int> ready{0};
      std::vector<std::vector<double>> per(sets.size());
      std::vector<std::thread> threads;
      for (size_t k = 0; k < sets.size(); ++k)
        threads.emplace_back([&, k] {
          // Start together: every thread spins until all have arrived.
          ready.fetch_add(1);
          while (ready.load() < cores) {
          }
          for (int r = 0; r < kTogether; ++r) per[k].push_back(sets[k]->Pass(kTokens[i], nullptr));
        });
      for (auto& t : threads) t.join();
      for (const auto& v : per) together[i].insert(together[i].end(), v.begin(), v.end());
    }
  }
  for (size_t i = 0; i < std::size(kTokens); ++i)
    slowdown.push_back(std::max(1.0, Median(together[i]) / std::max(Median(alone[i]), 1e-9)));
  return slowdown;
}

double MeasureAttentionFlops(int head_dim) {
  // One decode query head over an F16 cache of 512 positions (a mid-length context), as the
  // decoder calls it per head; 32 heads, median of 7 passes (~1 ms each here).
  const int d = std::max(head_dim, 1), n_kv = 512, heads = 32, block = 16;
  std::vector<uint16_t> k(static_cast<size_t>(n_kv) * d, 0x3c00), v(k);  // f16 1.0
  std::vector<int32_t> blocks(n_kv / block);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  kernels::PagedKv kv;
  kv.k_base = reinterpret_cast<const uint8_t*>(k.data());
  kv.v_base = reinterpret_cast<const uint8_t*>(v.data());
  kv.k_row_stride = kv.v_row_stride = 2 * static_cast<uint64_t>(d);
  kv.block_size = block;
  kv.blocks = blocks;
  std::vector<float> q(d, 0.1f), out(d),
      scratch(static_cast<size_t>(n_kv + d + kernels::kAttnTile));
  std::vector<double> times;
  for (int r = 0; r < 8; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int h = 0; h < heads; ++h)
      kernels::AttendOneHead(q.data(), d, d, 0.125f, kv, n_kv, out.data(), scratch.data());
    if (r > 0) times.push_back(Seconds(t0));  // the first pass warms the caches
  }
  // The planner's count: 2 (dk + dv) flops per head and cached position.
  return 2.0 * (2.0 * d) * n_kv * heads / std::max(Median(times), 1e-9);
}

measure::NodeInfo MeasureNode(const std::string& name, const std::string& address,
                              uint64_t mem_limit, int n_threads, const MeasureShape& shape) {
  measure::NodeInfo n;
  n.name = name;
  n.address = address;
  n.mem_limit = mem_limit;
  n.n_threads = n_threads;
  n.isa = kernels::SimdTargetName();
  ThreadPool pool(n_threads);
  // 3 arrays x 32 MiB: past any L3 here, and 96 MiB transient fits a 256 MiB node (freed
  // before any weights load).
  n.mem_bw = MeasureTriadBandwidth(pool, size_t{32} << 20);
  n.weight_bw_batch = StreamTable(shape, DType::kQ4_0, &pool);
  n.weight_bw = n.weight_bw_batch.empty() ? 0 : n.weight_bw_batch[0];
  for (DType t : shape.types) {
    if (t == DType::kQ4_0 || std::find(std::begin(kTypes), std::end(kTypes), t) == std::end(kTypes))
      continue;
    std::vector<double> table = StreamTable(shape, t, &pool);
    if (!table.empty()) n.type_bw_batch.emplace_back(t, std::move(table));
  }
  for (DType t : kTypes) n.matmul_flops.emplace_back(t, MatMulFlops(t, &pool));
  n.attn_flops = MeasureAttentionFlops(shape.head_dim);
  return n;
}

}  // namespace shoal::measure
