// MeasureNode: what a node reports to the planner: STREAM-triad bandwidth, the rate decode
// streams weights through the matmul kernels, matmul speed per weight type, and the speed of
// the cached-attention kernel.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "dist/node_agent.h"
#include "io/mapped_file.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "threading/membw.h"
#include "threading/thread_pool.h"

namespace shoal::dist {

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

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

}  // namespace

double MeasureWeightStream(ThreadPool* pool, int64_t tokens) {
  // 7 Q4_0 matrices of [4096, 4096] (9 MiB each, the size of a 7B model's attention matrices),
  // laid out as the model holds them, 63 MiB in all: twice the 32 MiB L3 of the largest CPU
  // here, so each round reads DRAM, as a decode token does. One source matrix is laid out 7
  // times, so the transient peak is 72 MiB (freed before weights load).
  const int64_t rows = 4096, cols = 4096, copies = 7;
  const uint64_t row_bytes = *RowBytes(DType::kQ4_0, cols);
  const uint64_t bytes = row_bytes * static_cast<uint64_t>(rows);
  std::vector<uint8_t> src(bytes, 0);
  Result<uint8_t*> pool_mem = MapAnonymousHuge(bytes * copies, "weight-stream measurement");
  if (!pool_mem.ok()) return 0;
  kernels::MatrixView base{DType::kQ4_0, rows, cols, src.data(), row_bytes};
  std::vector<kernels::MatrixView> views;
  for (int64_t i = 0; i < copies; ++i) {
    uint8_t* dst = *pool_mem + bytes * static_cast<uint64_t>(i);
    views.push_back(kernels::CanPretile(base)
                        ? kernels::Pretile(base, dst, pool)
                        : kernels::MatrixView{base.type, rows, cols, dst, row_bytes});
    if (!views.back().tiled) std::copy(src.begin(), src.end(), dst);
  }
  std::vector<float> x(static_cast<size_t>(tokens * cols), 0.5f), y(tokens * rows);
  kernels::MatMulScratch scratch;
  // A warm-up round, then the median of 15 (each round ~4 ms at 16 GB/s): decode streams for
  // seconds, so the typical round, not the luckiest, is its rate (on this shared host the best
  // of 15 read 15-24 GB/s from one run to the next and ran ~30% ahead of served decode).
  std::vector<double> times;
  for (int r = 0; r < 16; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const kernels::MatrixView& v : views)
      kernels::MatMul(v, x.data(), cols, tokens, y.data(), rows, pool, &scratch);
    if (r > 0) times.push_back(Seconds(t0));
  }
  ::munmap(*pool_mem, bytes * copies);
  return static_cast<double>(bytes * copies) / std::max(Median(times), 1e-9);
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

planner::NodeInfo MeasureNode(const std::string& name, const std::string& address,
                              uint64_t mem_limit, int n_threads, int head_dim) {
  planner::NodeInfo n;
  n.name = name;
  n.address = address;
  n.mem_limit = mem_limit;
  n.n_threads = n_threads;
  n.isa = kernels::SimdTargetName();
  ThreadPool pool(n_threads);
  // 3 arrays x 32 MiB: past any L3 here, and 96 MiB transient fits a 256 MiB node (freed
  // before any weights load).
  n.mem_bw = MeasureTriadBandwidth(pool, size_t{32} << 20);
  for (int64_t tokens : {1, 2, 4, 8}) {
    const double bw = MeasureWeightStream(&pool, tokens);
    if (bw <= 0) break;
    n.weight_bw_batch.push_back(bw);
  }
  n.weight_bw = n.weight_bw_batch.empty() ? 0 : n.weight_bw_batch[0];
  // The types of the model zoo's files: Q4_0/Q8_0/F16 layers, K-quant mixes (Q4_K_M's Q6_K
  // output head and FFN down matrices), MXFP4 experts.
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kF16, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
                  DType::kMXFP4})
    n.matmul_flops.emplace_back(t, MatMulFlops(t, &pool));
  n.attn_flops = MeasureAttentionFlops(head_dim);
  return n;
}

}  // namespace shoal::dist
