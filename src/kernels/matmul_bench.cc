// Micro-benchmark of MatMul at 2048 x 2048 for every weight type (F32 ... MXFP4): matvec
// (1 token) and batches of 4 to 256 tokens on 1 and 2 threads, the matrix in cache (BM_MatMul)
// or streamed from DRAM (BM_MatMulCold, Q4_0 also laid out at load: pretiled:1). Counters: GB/s of
// weights read (bytes of the matrix per call / time) and GFLOP/s (2 * rows * cols * tokens / time).
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
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

// A model's weights are far larger than the last-level cache, so every matmul streams its
// matrix from DRAM; one 2048 x 2048 matrix called again and again stays in L3 (32 MB a CCD on
// Zen 4). The "cold" benchmarks cycle through copies of it filling kColdBytes.
constexpr uint64_t kColdBytes = uint64_t{256} << 20;

// Bytes advised for transparent huge pages, as the model's weights are (MapMode::kReadHuge and
// the pretiled arena): with 4 KiB pages the hardware prefetcher stops at every page.
struct HugeBuffer {
  uint8_t* p = nullptr;
  uint64_t n = 0;
  void resize(uint64_t bytes) {
    n = bytes;
    p = static_cast<uint8_t*>(
        ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) std::abort();  // a benchmark binary: no way to go on
    ::madvise(p, n, MADV_HUGEPAGE);
  }
  uint8_t* data() const { return p; }
  uint64_t size() const { return n; }
  ~HugeBuffer() {
    if (p != nullptr) ::munmap(p, n);
  }
};

struct Fixture {
  HugeBuffer weights;             // copies x [kRows, row bytes]
  std::vector<MatrixView> views;  // one per copy
  HugeBuffer tiled;               // the copies laid out by Pretile, where it applies
  std::vector<MatrixView> tiled_views;
  uint64_t matrix_bytes = 0;
};

const Fixture& Weights(DType t, bool cold) {
  static std::unique_ptr<Fixture> cache[2][std::size(kTypes)];
  size_t i = 0;
  while (kTypes[i] != t) ++i;
  std::unique_ptr<Fixture>& slot = cache[cold ? 1 : 0][i];
  if (!slot) {
    auto f = std::make_unique<Fixture>();
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> row(kCols);
    const uint64_t rb = *RowBytes(t, kCols);
    f->matrix_bytes = rb * kRows;
    const uint64_t copies = cold ? (kColdBytes + f->matrix_bytes - 1) / f->matrix_bytes : 1;
    f->weights.resize(f->matrix_bytes * copies);
    for (int64_t r = 0; r < kRows; ++r) {
      for (auto& v : row) v = dist(rng);
      QuantizeWeights(t, row.data(), f->weights.data() + r * rb, kCols);
    }
    for (uint64_t c = 0; c < copies; ++c) {
      uint8_t* base = f->weights.data() + c * f->matrix_bytes;
      if (c > 0) std::copy_n(f->weights.data(), f->matrix_bytes, base);
      f->views.push_back(MatrixView{t, kRows, kCols, base, rb});
    }
    if (CanPretile(f->views[0])) {
      f->tiled.resize(f->weights.size());
      for (uint64_t c = 0; c < copies; ++c)
        f->tiled_views.push_back(
            Pretile(f->views[c], f->tiled.data() + c * f->matrix_bytes, /*pool=*/nullptr));
    }
    slot = std::move(f);
  }
  return *slot;
}

// Args: type index, tokens, threads[, pretiled].
void Run(benchmark::State& state, bool cold) {
  const DType t = kTypes[state.range(0)];
  const int64_t tokens = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const Fixture& w = Weights(t, cold);
  const bool pretiled = state.range(3) != 0;
  if (pretiled && w.tiled_views.empty()) {
    state.SkipWithError("no pretiled layout for this type on this machine");
    return;
  }
  const std::vector<MatrixView>& views = pretiled ? w.tiled_views : w.views;
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(tokens * kCols)), y(static_cast<size_t>(tokens * kRows));
  for (auto& v : x) v = dist(rng);
  ThreadPool pool(threads);
  MatMulScratch scratch;
  size_t copy = 0;
  for (auto _ : state) {
    MatMul(views[copy], x.data(), kCols, tokens, y.data(), kRows, &pool, &scratch);
    copy = copy + 1 == views.size() ? 0 : copy + 1;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.matrix_bytes) * iters / 1e9,
                                              benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * kRows * kCols * static_cast<double>(tokens) * iters / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(DTypeName(t)) + " " + SimdTargetName());
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "tokens", "threads", "pretiled"});
  for (int64_t t = 0; t < static_cast<int64_t>(std::size(kTypes)); ++t)
    for (int64_t tokens : {1, 4, 8, 16, 64, 256})
      for (int64_t threads : {1, 2}) b->Args({t, tokens, threads, 0});
}

// Weights from DRAM, as in a model's forward: the types of the synth presets and the decode
// and pipeline micro-batch sizes.
void ColdArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "tokens", "threads", "pretiled"});
  for (int64_t t = 0; t < static_cast<int64_t>(std::size(kTypes)); ++t) {
    const DType d = kTypes[t];
    if (d != DType::kQ4_0 && d != DType::kQ8_0 && d != DType::kQ4_K && d != DType::kQ6_K) continue;
    for (int64_t tokens : {1, 2, 4, 8, 16, 32})
      for (int64_t threads : {1, 2})
        for (int64_t pretiled : {0, 1})
          if (pretiled == 0 || d == DType::kQ4_0) b->Args({t, tokens, threads, pretiled});
  }
}

void BM_MatMul(benchmark::State& state) { Run(state, false); }
void BM_MatMulCold(benchmark::State& state) { Run(state, true); }

BENCHMARK(BM_MatMul)->Apply(Args)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MatMulCold)->Apply(ColdArgs)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shoal::kernels

BENCHMARK_MAIN();
