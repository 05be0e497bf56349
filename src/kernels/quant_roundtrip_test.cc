// Quantize -> Dequantize round trips for every type, and bit-exactness against llama-quantize's
// real output: the tiny models' Q8_0/Q4_0 tensors are requantized from their F32 twins.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/quant.h"
#include "kernels/test_util.h"

namespace shoal::kernels {
namespace {

using testing::Bytes;
using testing::RandomFloats;

struct Bound {
  DType type;
  double max_rel_rms;  // RMS(error) / RMS(x) for N(0, 1) data
};

// Measured on this data (seed 42): f16 2.0e-4, bf16 1.7e-3, q8_0 5.5e-3, q8_k 7.4e-3, q6_k 1.8e-2,
// q5_0 4.4e-2, q5_1 3.8e-2, q5_k 3.7e-2, q4_0 8.9e-2, q4_1 7.7e-2, q4_k 7.2e-2, q3_k 0.154,
// mxfp4 0.117, q2_k 0.304. The bounds leave about 35% of headroom.
constexpr Bound kBounds[] = {
    {DType::kF32, 0.0},   {DType::kF16, 3e-4},  {DType::kBF16, 2.5e-3}, {DType::kQ8_0, 8e-3},
    {DType::kQ8_1, 8e-3}, {DType::kQ8_K, 1e-2}, {DType::kQ6_K, 2.5e-2}, {DType::kQ5_0, 6e-2},
    {DType::kQ5_1, 5e-2}, {DType::kQ5_K, 5e-2}, {DType::kQ4_0, 0.12},   {DType::kQ4_1, 0.1},
    {DType::kQ4_K, 0.1},  {DType::kQ3_K, 0.21}, {DType::kMXFP4, 0.16},  {DType::kQ2_K, 0.41},
};

double RelRms(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    s += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(e / s);
}

TEST(QuantRoundTrip, ErrorBoundsPerType) {
  constexpr int64_t kN = 8 * 256;
  const auto x = RandomFloats(kN, 42);
  for (const Bound& b : kBounds) {
    SCOPED_TRACE(std::string(DTypeName(b.type)));
    std::vector<uint8_t> q(Bytes(b.type, kN));
    std::vector<float> y(kN);
    QuantizeWeights(b.type, x.data(), q.data(), kN);
    Dequantize(b.type, q.data(), y.data(), kN);
    const double err = RelRms(x, y);
    EXPECT_LE(err, b.max_rel_rms);
    // Quantize (activation semantics) is a faithful quantizer too.
    Quantize(b.type, x.data(), q.data(), kN);
    Dequantize(b.type, q.data(), y.data(), kN);
    EXPECT_LE(RelRms(x, y), b.max_rel_rms);
  }
}

// Zero, constant and single-spike blocks must not produce NaN or garbage.
TEST(QuantRoundTrip, DegenerateBlocks) {
  constexpr int64_t kN = 3 * 256;
  std::vector<float> x(kN, 0.0f);
  for (int64_t i = 256; i < 512; ++i) x[i] = 0.75f;
  x[600] = -5.0f;
  for (const Bound& b : kBounds) {
    SCOPED_TRACE(std::string(DTypeName(b.type)));
    std::vector<uint8_t> q(Bytes(b.type, kN));
    std::vector<float> y(kN);
    QuantizeWeights(b.type, x.data(), q.data(), kN);
    Dequantize(b.type, q.data(), y.data(), kN);
    for (int64_t i = 0; i < 256; ++i) ASSERT_EQ(y[i], 0.0f) << i;
    for (int64_t i = 0; i < kN; ++i) ASSERT_TRUE(std::isfinite(y[i])) << i;
    EXPECT_NEAR(y[600], -5.0f, 1.0f);  // MXFP4 has no 5: -4 and -6 tie, ggml picks -4
  }
}

TEST(QuantRoundTrip, QuantizeEqualsRefQuantize) {
  constexpr int64_t kN = 4 * 256;
  const auto x = RandomFloats(kN, 5, 3.0f);
  for (const Bound& b : kBounds) {
    SCOPED_TRACE(std::string(DTypeName(b.type)));
    std::vector<uint8_t> q(Bytes(b.type, kN)), r(Bytes(b.type, kN));
    Quantize(b.type, x.data(), q.data(), kN);
    ref::Quantize(b.type, x.data(), r.data(), kN);
    EXPECT_EQ(q, r);
  }
}

// llama-quantize (no imatrix) wrote the tiny models' Q8_0 / Q4_0 tensors from the F32 files with
// ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref: QuantizeWeights must give the same bytes.
TEST(QuantRoundTrip, MatchesLlamaQuantizeOnTinyModels) {
  int checked = 0;
  for (const char* arch : {"llama", "qwen3", "qwen3moe", "deepseek2", "kimi-k3"}) {
    const std::string dir = testing::SharedDir() + "/models/tiny/";
    testing::TinyGguf f32;
    if (!f32.Open(dir + arch + "-f32.gguf")) continue;
    for (const char* quant : {"-q8_0.gguf", "-q4_0.gguf"}) {
      testing::TinyGguf q;
      ASSERT_TRUE(q.Open(dir + arch + quant)) << arch << quant;
      for (const auto& t : q.tensors()) {
        const DType type = static_cast<DType>(t.type);
        if (type != DType::kQ8_0 && type != DType::kQ4_0) continue;
        const auto* src = f32.Find(t.name);
        ASSERT_NE(src, nullptr) << t.name;
        ASSERT_EQ(src->type, 0u) << t.name;
        const int64_t n = t.elements();
        std::vector<uint8_t> mine(Bytes(type, n));
        QuantizeWeights(type, reinterpret_cast<const float*>(f32.Data(*src)), mine.data(), n);
        ASSERT_EQ(std::memcmp(mine.data(), q.Data(t), mine.size()), 0)
            << arch << quant << " " << t.name;
        ++checked;
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "tiny models not found under " << testing::SharedDir();
  EXPECT_GT(checked, 100);
}

// Real Q4_K / Q6_K tensors (llama-quantize Q4_K_M) against the Q8_0 quantization of the same F32
// weights: a layout mistake would show up as errors of the order of the weights themselves.
TEST(QuantRoundTrip, RealKQuantTensorsMatchTheirQ8_0Twins) {
  const std::string dir = testing::SharedDir() + "/models/";
  testing::TinyGguf k, q8;
  if (!k.Open(dir + "tiny-dense256-random-q4_k_m.gguf") ||
      !q8.Open(dir + "tiny-dense256-random-q8_0.gguf")) {
    GTEST_SKIP() << "dense256 models not found";
  }
  int checked_q4k = 0, checked_q6k = 0;
  for (const auto& t : k.tensors()) {
    const DType type = static_cast<DType>(t.type);
    if (type != DType::kQ4_K && type != DType::kQ6_K) continue;
    const auto* twin = q8.Find(t.name);
    ASSERT_NE(twin, nullptr) << t.name;
    ASSERT_EQ(static_cast<DType>(twin->type), DType::kQ8_0);
    const int64_t n = t.elements();
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    Dequantize(type, k.Data(t), a.data(), n);
    Dequantize(DType::kQ8_0, q8.Data(*twin), b.data(), n);
    const double err = RelRms(b, a);
    EXPECT_LT(err, type == DType::kQ4_K ? 0.1 : 0.03) << t.name;
    (type == DType::kQ4_K ? checked_q4k : checked_q6k)++;
  }
  EXPECT_GT(checked_q4k, 0);
  EXPECT_GT(checked_q6k, 0);
}

}  // namespace
}  // namespace shoal::kernels
