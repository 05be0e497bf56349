// Attention tests: the AVX2/F16C attention returns exactly the scalar reference's bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/attention_internal.h"

namespace shoal::kernels {
namespace {

TEST(AttentionTest, SimdMatchesReferenceBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (DType dt : {DType::kF16, DType::kF32}) {
    for (int hd : {8, 16, 64, 128}) {
      const int n_heads = 2, block = 16, max_kv = 200;
      const int n_blocks = (max_kv + block - 1) / block;
      const int es = dt == DType::kF16 ? 2 : 4;
      const uint64_t row = static_cast<uint64_t>(n_heads * hd * es) + 4;  // odd padding
      std::vector<uint8_t> kbuf(row * n_blocks * block + 16), vbuf(kbuf.size());
      for (size_t i = 0; i + es <= kbuf.size(); i += es) {
        // Wide dynamic range so the double sums and F16 roundings are exercised.
        const float a = nd(rng) * (i % 7 == 0 ? 300.f : 1.f), b = nd(rng);
        if (dt == DType::kF16) {
          const uint16_t ha = Fp32ToFp16(a), hb = Fp32ToFp16(b);
          std::memcpy(&kbuf[i], &ha, 2);
          std::memcpy(&vbuf[i], &hb, 2);
        } else {
          std::memcpy(&kbuf[i], &a, 4);
          std::memcpy(&vbuf[i], &b, 4);
        }
      }
      std::vector<int32_t> blocks(static_cast<size_t>(n_blocks));
      std::iota(blocks.begin(), blocks.end(), 0);
      std::shuffle(blocks.begin(), blocks.end(), rng);
      PagedKv kv;
      kv.k_base = kbuf.data() + 4;  // rows not 32-byte aligned
      kv.v_base = vbuf.data() + 4;
      kv.k_row_stride = kv.v_row_stride = row;
      kv.k_head_offset = kv.v_head_offset = hd;
      kv.dtype = dt;
      kv.block_size = block;
      kv.blocks = blocks;
      std::vector<float> q(static_cast<size_t>(hd));
      for (float& x : q) x = nd(rng) * 2.f;
      for (int n_kv : {1, 7, 8, 9, 63, 64, 65, 130, 200}) {
        for (bool tiled : {false, true}) {
          std::vector<float> want(hd), got(hd);
          std::vector<float> s1(static_cast<size_t>(max_kv + hd + kAttnTile)), s2(s1.size());
          internal::AttendOneHeadReference(q.data(), hd, hd, 0.125f, kv, n_kv, want.data(),
                                           s1.data(), tiled);
          if (!internal::AttendOneHeadAvx2(q.data(), hd, hd, 0.125f, kv, n_kv, got.data(),
                                           s2.data(), tiled))
            GTEST_SKIP() << "no AVX2/F16C on this CPU";
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4))
              << "dtype " << static_cast<int>(dt) << " hd " << hd << " n_kv " << n_kv << " tiled "
              << tiled;
          // The public entry point takes the same path.
          AttendOneHead(q.data(), hd, hd, 0.125f, kv, n_kv, got.data(), s2.data(), tiled);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4));
        }
      }
    }
  }
}

// AttendHeads over a GQA group gives each head exactly its AttendOneHead bits, on every path.
TEST(AttentionTest, HeadsOfAGroupMatchOneHeadEach) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int hd : {32, 64, 128}) {
    const int n_kv_heads = 2, group = 5, block = 16, max_kv = 150;
    const int n_blocks = (max_kv + block - 1) / block;
    const uint64_t row = static_cast<uint64_t>(n_kv_heads * hd * 2) + 6;
    std::vector<uint8_t> kbuf(row * n_blocks * block + 16), vbuf(kbuf.size());
    for (size_t i = 0; i + 2 <= kbuf.size(); i += 2) {
      const uint16_t a = Fp32ToFp16(nd(rng) * (i % 11 == 0 ? 40.f : 1.f)), b = Fp32ToFp16(nd(rng));
      std::memcpy(&kbuf[i], &a, 2);
      std::memcpy(&vbuf[i], &b, 2);
    }
    std::vector<int32_t> blocks(static_cast<size_t>(n_blocks));
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    PagedKv kv;
    kv.k_base = kbuf.data() + 6;
    kv.v_base = vbuf.data() + 6;
    kv.k_row_stride = kv.v_row_stride = row;
    kv.k_head_offset = kv.v_head_offset = hd;  // the second KV head
    kv.dtype = DType::kF16;
    kv.block_size = block;
    kv.blocks = blocks;
    const int64_t q_stride = hd + 3, out_stride = hd + 5;
    std::vector<float> q(static_cast<size_t>(q_stride * group));
    for (float& x : q) x = nd(rng) * 2.f;
    for (int n_kv : {1, 9, 63, 64, 65, 129, 150}) {
      for (bool tiled : {false, true}) {
        std::vector<float> want(static_cast<size_t>(out_stride * group), -1.f), got(want);
        std::vector<float> s1(AttendHeadsScratch(group, hd, hd, n_kv)), s2(s1.size() + 1);
        for (int h = 0; h < group; ++h)
          AttendOneHead(q.data() + h * q_stride, hd, hd, 0.125f, kv, n_kv,
                        want.data() + h * out_stride, s1.data(), tiled);
        AttendHeads(q.data(), q_stride, group, hd, hd, 0.125f, kv, n_kv, got.data(), out_stride,
                    s2.data() + 1, tiled);  // scratch not 32-byte aligned
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4))
            << "hd " << hd << " n_kv " << n_kv << " tiled " << tiled;
      }
    }
  }
}

}  // namespace
}  // namespace shoal::kernels
