// MeasureNode: a node's STREAM-triad bandwidth and matmul speed, which it reports to the
// planner.
#include <algorithm>
#include <chrono>
#include <vector>

#include "dist/node_agent.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "threading/membw.h"
#include "threading/thread_pool.h"

namespace shoal::dist {

namespace {

double MatMulFlops(DType t, ThreadPool* pool) {
  // [1024, 2048] weights x 8 tokens, best of 5: long enough to leave the noise (~2 ms), small
  // enough (1.1 MiB of Q4_0) to run in any node's budget.
  const int64_t rows = 1024, cols = 2048, tokens = 8;
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
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::MatMul(mv, x.data(), cols, tokens, y.data(), rows, pool, &scratch);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * rows * cols * tokens / std::max(best, 1e-9);
}

}  // namespace

planner::NodeInfo MeasureNode(const std::string& name, const std::string& address,
                              uint64_t mem_limit, int n_threads) {
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
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kF16})
    n.matmul_flops.emplace_back(t, MatMulFlops(t, &pool));
  return n;
}

}  // namespace shoal::dist
