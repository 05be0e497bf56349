// Micro-benchmark of MatMul at 2048 x 2048 for every weight type (F32 ... MXFP4): matvec
// (1 token) and batches of 4 to 256 tokens on 1 and 2 threads. Counters: GB/s of weights read
// (bytes of the matrix per call / time) and GFLOP/s (2 * rows * cols * tokens / time).
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace shoal::kernels {
namespace {

constexpr int64_t kRows = 2048, kCols = 2048;
constexpr DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                            DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K,
                            DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kMXFP4};

struct Fixture {
  std::vector<uint8_t> weights;
  MatrixView view;
};

const Fixture& Weights(DType t) {
  static std::unique_ptr<Fixture> cache[std::size(kTypes)];
  size_t i = 0;
  while (kTypes[i] != t) ++i;
  if (!cache[i]) {
    auto f = std::make_unique<Fixture>();
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> row(kCols);
    const uint64_t rb = *RowBytes(t, kCols);
    f->weights.resize(rb * kRows);
    for (int64_t r = 0; r < kRows; ++r) {
      for (auto& v : row) v = dist(rng);
      QuantizeWeights(t, row.data(), f->weights.data() + r * rb, kCols);
    }
    f->view = MatrixView{t, kRows, kCols, f->weights.data(), rb};
    cache[i] = std::move(f);
  }
  return *cache[i];
}

// Args: type index, tokens, threads.
void BM_MatMul(benchmark::State& state) {
  const DType t = kTypes[state.range(0)];
  const int64_t tokens = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const Fixture& w = Weights(t);
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(tokens * kCols)), y(static_cast<size_t>(tokens * kRows));
  for (auto& v : x) v = dist(rng);
  ThreadPool pool(threads);
  MatMulScratch scratch;
  for (auto _ : state) {
    MatMul(w.view, x.data(), kCols, tokens, y.data(), kRows, &pool, &scratch);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.weights.size()) * iters / 1e9,
                                              benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * kRows * kCols * static_cast<double>(tokens) * iters / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(DTypeName(t)) + " " + SimdTargetName());
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "tokens", "threads"});
  for (int64_t t = 0; t < static_cast<int64_t>(std::size(kTypes)); ++t)
    for (int64_t tokens : {1, 4, 8, 16, 64, 256})
      for (int64_t threads : {1, 2}) b->Args({t, tokens, threads});
}

BENCHMARK(BM_MatMul)->Apply(Args)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shoal::kernels

BENCHMARK_MAIN();
