// Reference kernels of the K-quant super-block formats (256 elements): dequantization of
// Q2_K..Q6_K and Q8_K, the Q8_K activation quantizer, and dot products with Q8_K activations.
#include <algorithm>
#include <cmath>

#include "kernels/quant_internal.h"

namespace shoal::kernels::internal {
namespace {

// --- Unpacking one super-block into its 256 integer quants, in element order. ---

// Q2_K / Q3_K low bits: element e of half h = e / 128 is bits 2 * ((e % 128) / 32) of
// qs[32 h + e % 32].
int Q2Bits(const uint8_t* qs, int e) {
  const int h = e / 128, r = e % 128;
  return (qs[32 * h + r % 32] >> (2 * (r / 32))) & 3;
}

void UnpackQ3K(const uint8_t* blk, int8_t q[kQKK]) {
  const uint8_t* qs = blk + q3_k::kQs;
  const uint8_t* hm = blk + q3_k::kHmask;
  for (int e = 0; e < kQKK; ++e) {
    // The high bit of element e is bit e / 32 of hmask[e % 32]; a clear bit means minus 4.
    const bool high = (hm[e % 32] >> (e / 32)) & 1;
    q[e] = static_cast<int8_t>(Q2Bits(qs, e) - (high ? 0 : 4));
  }
}

// Q4_K / Q5_K: each 64-element group g uses qs[32 g .. 32 g + 32): low nibbles first.
int Q4Nibble(const uint8_t* qs, int e) {
  const int g = e / 64, r = e % 64;
  const uint8_t b = qs[32 * g + r % 32];
  return r < 32 ? (b & 0xF) : (b >> 4);
}

void UnpackQ5K(const uint8_t* blk, uint8_t q[kQKK]) {
  const uint8_t* qs = blk + q5_k::kQs;
  const uint8_t* qh = blk + q5_k::kQh;
  // The fifth bit of element e is bit e / 32 of qh[e % 32].
  for (int e = 0; e < kQKK; ++e)
    q[e] = static_cast<uint8_t>(Q4Nibble(qs, e) | (((qh[e % 32] >> (e / 32)) & 1) << 4));
}

// Q6_K: in half h, element r = 32 k + l takes a nibble of ql[64 h + l + 32 (k & 1)] (low for
// k < 2) and bits 2k of qh[32 h + l] as bits 4-5; stored with an offset of 32.
void UnpackQ6K(const uint8_t* blk, int8_t q[kQKK]) {
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lb = blk[q6_k::kQl + 64 * h + l + 32 * (k & 1)];
    const int lo = k < 2 ? (lb & 0xF) : (lb >> 4);
    const int hi = (blk[q6_k::kQh + 32 * h + l] >> (2 * k)) & 3;
    q[e] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

const int8_t* Q8KQs(const uint8_t* bx) { return reinterpret_cast<const int8_t*>(bx + q8_k::kQs); }

// Sum over super-blocks into the canonical 8 lanes (one lane per super-block index % 8).
template <int kWBytes, typename BlockFn>
float DotSuperBlocks(const uint8_t* w, const uint8_t* x, int64_t n, BlockFn block) {
  float lanes[kBlockLanes] = {};
  for (int64_t b = 0; b < n / kQKK; ++b)
    lanes[b % kBlockLanes] += block(w + b * kWBytes, x + b * q8_k::kBytes);
  return SumBlockLanes(lanes);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Dequantization (ggml's dequantize_row_q*_K, same float expressions).

void DequantizeQ2_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, src += q2_k::kBytes, dst += kQKK) {
    const float d = LoadHalf(src + q2_k::kD), min = LoadHalf(src + q2_k::kDmin);
    for (int e = 0; e < kQKK; ++e) {
      const uint8_t sc = src[q2_k::kScales + e / 16];
      const float dl = d * static_cast<float>(sc & 0xF), ml = min * static_cast<float>(sc >> 4);
      dst[e] = dl * static_cast<float>(Q2Bits(src + q2_k::kQs, e)) - ml;
    }
  }
}

void DequantizeQ3_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, src += q3_k::kBytes, dst += kQKK) {
    const float d_all = LoadHalf(src + q3_k::kD);
    int8_t scales[16], q[kQKK];
    UnpackQ3KScales(src + q3_k::kScales, scales);
    UnpackQ3K(src, q);
    for (int e = 0; e < kQKK; ++e)
      dst[e] = (d_all * static_cast<float>(scales[e / 16])) * static_cast<float>(q[e]);
  }
}

void DequantizeQ4_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, src += q4_k::kBytes, dst += kQKK) {
    const float d = LoadHalf(src + q4_k::kD), min = LoadHalf(src + q4_k::kDmin);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      ScaleMinK4(j, src + q4_k::kScales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = min * static_cast<float>(m);
      for (int e = 32 * j; e < 32 * j + 32; ++e)
        dst[e] = d1 * static_cast<float>(Q4Nibble(src + q4_k::kQs, e)) - m1;
    }
  }
}

void DequantizeQ5_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, src += q5_k::kBytes, dst += kQKK) {
    const float d = LoadHalf(src + q5_k::kD), min = LoadHalf(src + q5_k::kDmin);
    uint8_t q[kQKK];
    UnpackQ5K(src, q);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      ScaleMinK4(j, src + q5_k::kScales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = min * static_cast<float>(m);
      for (int e = 32 * j; e < 32 * j + 32; ++e) dst[e] = d1 * static_cast<float>(q[e]) - m1;
    }
  }
}

void DequantizeQ6_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, src += q6_k::kBytes, dst += kQKK) {
    const float d = LoadHalf(src + q6_k::kD);
    const int8_t* sc = reinterpret_cast<const int8_t*>(src + q6_k::kScales);
    int8_t q[kQKK];
    UnpackQ6K(src, q);
    for (int e = 0; e < kQKK; ++e)
      dst[e] = (d * static_cast<float>(sc[e / 16])) * static_cast<float>(q[e]);
  }
}

void DequantizeQ8_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, src += q8_k::kBytes, dst += kQKK) {
    const float d = LoadF32(src + q8_k::kD);
    const int8_t* qs = Q8KQs(src);
    for (int e = 0; e < kQKK; ++e) dst[e] = d * static_cast<float>(qs[e]);
  }
}

// ggml's quantize_row_q8_K_ref (llama.cpp's x86 backend uses it for activations too): the value
// of largest magnitude max maps to -127 (iscale = -127 / max), q = min(127, nearest_int(iscale x)),
// d = 1 / iscale, and bsums[j] = sum of the 16 quants of group j.
void QuantizeQ8_K(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, dst += q8_k::kBytes) {
    float max = 0, amax = 0;
    for (int j = 0; j < kQKK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    int16_t bsums[kQKK / 16] = {};
    if (amax == 0.f) {
      StoreF32(dst + q8_k::kD, 0.f);
      std::memset(dst + q8_k::kQs, 0, kQKK);
    } else {
      const float iscale = -127.f / max;
      for (int j = 0; j < kQKK; ++j) {
        const int v = std::min(127, NearestInt(iscale * x[j]));
        dst[q8_k::kQs + j] = static_cast<uint8_t>(static_cast<int8_t>(v));
        bsums[j / 16] = static_cast<int16_t>(bsums[j / 16] + static_cast<int8_t>(v));
      }
      StoreF32(dst + q8_k::kD, 1 / iscale);
    }
    std::memcpy(dst + q8_k::kBsums, bsums, sizeof(bsums));
  }
}

// ---------------------------------------------------------------------------------------------
// Dot products with Q8_K: exact int32 sums per super-block, then one float expression per
// super-block (below), accumulated in the canonical lanes.

// dall * isum - dmin * summs, isum = sum_j (sc_j & 15) sum_16 q2 q8, summs = sum_j (sc_j >> 4)
// bsum_j.
float DotQ2_K(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotSuperBlocks<q2_k::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    const int8_t* q8 = Q8KQs(bx);
    int32_t isum = 0, summs = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t sc = bw[q2_k::kScales + j];
      int32_t s = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) s += Q2Bits(bw + q2_k::kQs, e) * q8[e];
      isum += (sc & 0xF) * s;
      summs += (sc >> 4) * LoadI16(bx + q8_k::kBsums + 2 * j);
    }
    const float yd = LoadF32(bx + q8_k::kD);
    const float dall = yd * LoadHalf(bw + q2_k::kD), dmin = yd * LoadHalf(bw + q2_k::kDmin);
    return dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  });
}

float DotQ3_K(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotSuperBlocks<q3_k::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    const int8_t* q8 = Q8KQs(bx);
    int8_t scales[16], q[kQKK];
    UnpackQ3KScales(bw + q3_k::kScales, scales);
    UnpackQ3K(bw, q);
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t s = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) s += q[e] * q8[e];
      isum += scales[j] * s;
    }
    return (LoadHalf(bw + q3_k::kD) * LoadF32(bx + q8_k::kD)) * static_cast<float>(isum);
  });
}

// Q4_K and Q5_K: d * isum - dmin * summ with isum = sum_j sc_j sum_32 q q8 and
// summ = sum_j m_j (bsum_2j + bsum_2j+1).
template <int kBytes, int kD, int kDmin, int kScales>
float DotQ45K(const uint8_t* bw, const uint8_t* bx, const uint8_t* q) {
  const int8_t* q8 = Q8KQs(bx);
  int32_t isum = 0, summ = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    ScaleMinK4(j, bw + kScales, &sc, &m);
    int32_t s = 0;
    for (int e = 32 * j; e < 32 * j + 32; ++e) s += q[e] * q8[e];
    isum += sc * s;
    summ += m * (LoadI16(bx + q8_k::kBsums + 4 * j) + LoadI16(bx + q8_k::kBsums + 4 * j + 2));
  }
  const float yd = LoadF32(bx + q8_k::kD);
  const float d = yd * LoadHalf(bw + kD), dmin = yd * LoadHalf(bw + kDmin);
  return d * static_cast<float>(isum) - dmin * static_cast<float>(summ);
}

float DotQ4_K(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotSuperBlocks<q4_k::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    uint8_t q[kQKK];
    for (int e = 0; e < kQKK; ++e) q[e] = static_cast<uint8_t>(Q4Nibble(bw + q4_k::kQs, e));
    return DotQ45K<q4_k::kBytes, q4_k::kD, q4_k::kDmin, q4_k::kScales>(bw, bx, q);
  });
}

float DotQ5_K(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotSuperBlocks<q5_k::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    uint8_t q[kQKK];
    UnpackQ5K(bw, q);
    return DotQ45K<q5_k::kBytes, q5_k::kD, q5_k::kDmin, q5_k::kScales>(bw, bx, q);
  });
}

// (d_w * d_x) * isum with isum = sum_16 sc_j sum_16 (q6 - 32) q8.
float DotQ6_K(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotSuperBlocks<q6_k::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    const int8_t* q8 = Q8KQs(bx);
    const int8_t* sc = reinterpret_cast<const int8_t*>(bw + q6_k::kScales);
    int8_t q[kQKK];
    UnpackQ6K(bw, q);
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t s = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) s += q[e] * q8[e];
      isum += sc[j] * s;
    }
    return (LoadHalf(bw + q6_k::kD) * LoadF32(bx + q8_k::kD)) * static_cast<float>(isum);
  });
}

float DotQ8_K(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotSuperBlocks<q8_k::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    const int8_t* qw = Q8KQs(bw);
    const int8_t* qx = Q8KQs(bx);
    int32_t isum = 0;
    for (int e = 0; e < kQKK; ++e) isum += qw[e] * qx[e];
    return (LoadF32(bw + q8_k::kD) * LoadF32(bx + q8_k::kD)) * static_cast<float>(isum);
  });
}

}  // namespace shoal::kernels::internal
