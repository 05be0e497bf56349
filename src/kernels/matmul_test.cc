// MatMul tests: every output equals the single-row VecDot bit for bit, whatever the number of
// tokens in the batch, the thread count, the tiling and the strides (batch invariance).
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/quant.h"
#include "kernels/test_util.h"

namespace shoal::kernels {
namespace {

using testing::Bits;
using testing::Bytes;
using testing::RandomFloats;

constexpr DType kAllTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,
                               DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                               DType::kQ8_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                               DType::kQ5_K, DType::kQ6_K, DType::kQ8_K, DType::kMXFP4};

struct Matrix {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

Matrix MakeMatrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  const auto f = RandomFloats(rows * cols, seed);
  const uint64_t rb = Bytes(t, cols);
  m.bytes.resize(rb * static_cast<uint64_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    QuantizeWeights(t, f.data() + r * cols, m.bytes.data() + r * rb, cols);
  m.view = MatrixView{t, rows, cols, m.bytes.data(), rb};
  return m;
}

// y[t, r] as the definition says: VecDot of row r with the quantized token t.
std::vector<float> Expected(const MatrixView& w, const std::vector<float>& x, int64_t n_tokens) {
  const DType xt = VecDotType(w.type);
  std::vector<uint8_t> xq(Bytes(xt, w.cols));
  std::vector<float> y(static_cast<size_t>(n_tokens * w.rows));
  for (int64_t t = 0; t < n_tokens; ++t) {
    Quantize(xt, x.data() + t * w.cols, xq.data(), w.cols);
    for (int64_t r = 0; r < w.rows; ++r)
      y[t * w.rows + r] = VecDot(w.type, w.data + r * w.row_bytes, xq.data(), w.cols);
  }
  return y;
}

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(Bits(a[i]), Bits(b[i])) << what << " at " << i;
}

TEST(MatMul, BatchAndThreadInvariantForEveryType) {
  constexpr int64_t kRows = 37, kCols = 512, kTokens = 7;
  ThreadPool pool2(2), pool3(3), pool1(1);
  for (DType t : kAllTypes) {
    SCOPED_TRACE(std::string(DTypeName(t)));
    const Matrix m = MakeMatrix(t, kRows, kCols, 3);
    const auto x = RandomFloats(kTokens * kCols, 4, 2.0f);
    const auto want = Expected(m.view, x, kTokens);

    // One token at a time, single-threaded.
    MatMulScratch scratch;
    std::vector<float> one(kTokens * kRows);
    for (int64_t tok = 0; tok < kTokens; ++tok)
      MatMul(m.view, x.data() + tok * kCols, kCols, 1, one.data() + tok * kRows, kRows, nullptr,
             &scratch);
    ExpectSameBits(one, want, "n_tokens=1");

    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool1, &pool2, &pool3}) {
      std::vector<float> y(kTokens * kRows);
      MatMul(m.view, x.data(), kCols, kTokens, y.data(), kRows, pool, &scratch);
      ExpectSameBits(y, want, "n_tokens=7");
    }
  }
}

// More tokens than one token tile, rows over several grains, and row/column strides.
TEST(MatMul, LargeBatchWithStrides) {
  constexpr int64_t kRows = 100, kCols = 256, kTokens = 45, kLdx = 300, kLdy = 131;
  ThreadPool pool(3);
  for (DType t :
       {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(std::string(DTypeName(t)));
    const Matrix m = MakeMatrix(t, kRows, kCols, 8);
    const auto x = RandomFloats(kTokens * kLdx, 9);
    std::vector<float> xc(kTokens * kCols);
    for (int64_t tok = 0; tok < kTokens; ++tok)
      std::copy(x.begin() + tok * kLdx, x.begin() + tok * kLdx + kCols, xc.begin() + tok * kCols);
    const auto want = Expected(m.view, xc, kTokens);
    std::vector<float> y(kTokens * kLdy, -1.0f);
    MatMulScratch scratch;
    MatMul(m.view, x.data(), kLdx, kTokens, y.data(), kLdy, &pool, &scratch);
    for (int64_t tok = 0; tok < kTokens; ++tok) {
      for (int64_t r = 0; r < kRows; ++r)
        ASSERT_EQ(Bits(y[tok * kLdy + r]), Bits(want[tok * kRows + r])) << tok << "," << r;
      for (int64_t r = kRows; r < kLdy; ++r) ASSERT_EQ(y[tok * kLdy + r], -1.0f);  // untouched
    }
  }
}

// The tiled path's edges: a partial last group of blocks (23 and 9 blocks of 32), rows that are not
// a multiple of 4, panels cut by thread chunks, and every token-tile tail (1..3 tokens).
TEST(MatMul, TiledEdgesMatchSingleRow) {
  ThreadPool pool(2);
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    const bool k_quant = t == DType::kQ4_K || t == DType::kQ6_K;
    // K-quant groups are 8 super-blocks of 256: 9 and 3 leave partial groups, 16 none.
    const std::vector<int64_t> col_list = k_quant ? std::vector<int64_t>{256 * 9, 256 * 3, 256 * 16}
                                                  : std::vector<int64_t>{32 * 23, 32 * 9, 32 * 48};
    for (int64_t cols : col_list) {
      for (int64_t tokens : {4, 5, 6, 7, 10, 11, 13, 17, 18, 19}) {
        SCOPED_TRACE(std::string(DTypeName(t)) + " cols " + std::to_string(cols) + " tokens " +
                     std::to_string(tokens));
        const Matrix m = MakeMatrix(t, 75, cols, static_cast<uint32_t>(cols + tokens));
        const auto x = RandomFloats(tokens * cols, 11, 3.0f);
        const auto want = Expected(m.view, x, tokens);
        MatMulScratch scratch;
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<float> y(tokens * 75);
          MatMul(m.view, x.data(), cols, tokens, y.data(), 75, p, &scratch);
          ExpectSameBits(y, want, "tiled");
        }
      }
    }
  }
}

// Weights laid out once at load (Pretile) give the bits of the row-major matrix for every token
// count (one token included: the tiled layout has no row path), thread count and stride, and
// hold exactly the matrix's bytes.
TEST(MatMul, PretiledMatchesRowMajor) {
  const Matrix shape_only = MakeMatrix(DType::kQ4_0, 4, 512, 1);
  if (!CanPretile(shape_only.view)) GTEST_SKIP() << "no tiled Q4_0 kernels on " << SimdTargetName();
  EXPECT_FALSE(CanPretile(MakeMatrix(DType::kQ4_0, 6, 512, 1).view));      // rows not 4k
  EXPECT_FALSE(CanPretile(MakeMatrix(DType::kQ4_0, 8, 32 * 23, 1).view));  // partial group
  EXPECT_FALSE(CanPretile(MakeMatrix(DType::kQ4_K, 8, 2048, 1).view));
  ThreadPool pool(2);
  for (int64_t rows : {int64_t{4}, int64_t{100}, int64_t{1028}}) {
    const int64_t cols = rows == 1028 ? 2048 : 1024;
    const Matrix m = MakeMatrix(DType::kQ4_0, rows, cols, static_cast<uint32_t>(rows));
    ASSERT_TRUE(CanPretile(m.view));
    std::vector<uint8_t> tiled(m.bytes.size() + 64, 0xAB);
    const MatrixView tv = Pretile(m.view, tiled.data(), &pool);
    EXPECT_TRUE(tv.tiled);
    EXPECT_FALSE(CanPretile(tv));
    for (size_t i = m.bytes.size(); i < tiled.size(); ++i) ASSERT_EQ(tiled[i], 0xAB) << i;
    for (int64_t tokens : {1, 2, 3, 4, 5, 9, 33}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " tokens " + std::to_string(tokens));
      const int64_t ldy = rows + 3;
      const auto x = RandomFloats(tokens * cols, 21, 2.0f);
      const auto want = Expected(m.view, x, tokens);
      MatMulScratch scratch;
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> y(tokens * ldy, -1.0f);
        MatMul(tv, x.data(), cols, tokens, y.data(), ldy, p, &scratch);
        for (int64_t tok = 0; tok < tokens; ++tok) {
          for (int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(Bits(y[tok * ldy + r]), Bits(want[tok * rows + r])) << tok << "," << r;
          for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(y[tok * ldy + r], -1.0f);
        }
      }
    }
  }
}

// A longer step within the same 32-row class reuses the scratch as it is: no reallocation, so
// no page faulted in afresh (kernels::ScratchRows).
TEST(MatMul, ScratchGrowsInRowClassesAndIsReused) {
  const Matrix m = MakeMatrix(DType::kQ8_0, 16, 64, 1);
  const auto x = RandomFloats(40 * 64, 2);
  std::vector<float> y(40 * 16);
  MatMulScratch scratch;
  MatMul(m.view, x.data(), 64, 3, y.data(), 16, nullptr, &scratch);
  const uint8_t* at = scratch.xq.data();
  MatMul(m.view, x.data(), 64, 32, y.data(), 16, nullptr, &scratch);
  EXPECT_EQ(scratch.xq.data(), at);
  MatMul(m.view, x.data(), 64, 33, y.data(), 16, nullptr, &scratch);  // the next class
  EXPECT_EQ(scratch.xq.size(), 64u * 2 * 34);
  MatMul(m.view, x.data(), 64, 1, y.data(), 16, nullptr, &scratch);  // and never shrinks
  EXPECT_EQ(scratch.xq.size(), 64u * 2 * 34);
  EXPECT_EQ(ScratchRows(0), 0);
  EXPECT_EQ(ScratchRows(1), 32);
  EXPECT_EQ(ScratchRows(32), 32);
  EXPECT_EQ(ScratchRows(33), 64);
}

TEST(MatMul, EmptyShapesDoNothing) {
  const Matrix m = MakeMatrix(DType::kQ4_0, 4, 32, 1);
  std::vector<float> x(32, 1.0f), y(4, 7.0f);
  MatMulScratch scratch;
  MatMul(m.view, x.data(), 32, 0, y.data(), 4, nullptr, &scratch);
  EXPECT_EQ(y[0], 7.0f);
}

}  // namespace
}  // namespace shoal::kernels
