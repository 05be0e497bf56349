// Reference kernels of the 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1:
// dequantization, ggml's reference quantizers, the AVX activation quantizers and dot products.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "kernels/quant_internal.h"

namespace shoal::kernels::internal {
namespace {

// C's (int8_t)f / (uint8_t)f as GCC compiles it on x86 (cvttss2si, then the low byte), so the
// reference quantizers reproduce ggml even where its casts are out of range (NaN, huge ids).
int8_t TruncToInt8(float f) {
  if (!(f > -2147483648.f && f < 2147483648.f)) return 0;  // "integer indefinite" 0x80000000
  return static_cast<int8_t>(static_cast<int32_t>(f));
}

// _mm256_cvtps_epi32 of an already rounded value, then the saturating packs to int8.
int8_t RoundHalfEvenToInt8Sat(float f) {
  if (!(f > -2147483648.f && f < 2147483648.f)) return -128;
  if (f >= 127.f) return 127;
  if (f <= -128.f) return -128;
  return static_cast<int8_t>(NearestInt(f));
}

float AbsMax(const float* x, int n) {
  float amax = 0.f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

// The value of largest magnitude, keeping its sign (first one on ties), as ggml's Q4_0/Q5_0.
float SignedAbsMax(const float* x, int n) {
  float amax = 0.f, max = 0.f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void MinMax(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// The 32 fifth bits of Q5_0/Q5_1 as a 0x10 mask per element.
uint8_t Q5High(uint32_t qh, int j) { return static_cast<uint8_t>(((qh >> j) << 4) & 0x10); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Dequantization (ggml's dequantize_row_*): the first 16 elements are the low nibbles.

void DequantizeQ4_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, src += q4_0::kBytes, dst += kQK) {
    const float d = LoadHalf(src + q4_0::kD);
    const uint8_t* qs = src + q4_0::kQs;
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
      dst[j + kQK / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeQ4_1(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, src += q4_1::kBytes, dst += kQK) {
    const float d = LoadHalf(src + q4_1::kD), m = LoadHalf(src + q4_1::kM);
    const uint8_t* qs = src + q4_1::kQs;
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      dst[j + kQK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

void DequantizeQ5_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, src += q5_0::kBytes, dst += kQK) {
    const float d = LoadHalf(src + q5_0::kD);
    const uint32_t qh = LoadU32(src + q5_0::kQh);
    const uint8_t* qs = src + q5_0::kQs;
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>(((qs[j] & 0x0F) | Q5High(qh, j)) - 16) * d;
      dst[j + kQK / 2] = static_cast<float>(((qs[j] >> 4) | Q5High(qh, j + 16)) - 16) * d;
    }
  }
}

void DequantizeQ5_1(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, src += q5_1::kBytes, dst += kQK) {
    const float d = LoadHalf(src + q5_1::kD), m = LoadHalf(src + q5_1::kM);
    const uint32_t qh = LoadU32(src + q5_1::kQh);
    const uint8_t* qs = src + q5_1::kQs;
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>((qs[j] & 0x0F) | Q5High(qh, j)) * d + m;
      dst[j + kQK / 2] = static_cast<float>((qs[j] >> 4) | Q5High(qh, j + 16)) * d + m;
    }
  }
}

void DequantizeQ8_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, src += q8_0::kBytes, dst += kQK) {
    const float d = LoadHalf(src + q8_0::kD);
    const int8_t* qs = reinterpret_cast<const int8_t*>(src + q8_0::kQs);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(qs[j]) * d;
  }
}

void DequantizeQ8_1(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, src += q8_1::kBytes, dst += kQK) {
    const float d = LoadHalf(src + q8_1::kD);
    const int8_t* qs = reinterpret_cast<const int8_t*>(src + q8_1::kQs);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(qs[j]) * d;
  }
}

// ---------------------------------------------------------------------------------------------
// ggml's quantize_row_*_ref (what llama-quantize writes without an importance matrix).

void QuantizeWeightQ4_0(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK, dst += q4_0::kBytes) {
    const float d = SignedAbsMax(x, kQK) / -8;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    StoreHalf(dst + q4_0::kD, d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(TruncToInt8(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(TruncToInt8(x[j + kQK / 2] * id + 8.5f)));
      dst[q4_0::kQs + j] = static_cast<uint8_t>(static_cast<uint8_t>(lo) | (hi << 4));
    }
  }
}

void QuantizeWeightQ4_1(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK, dst += q4_1::kBytes) {
    float min, max;
    MinMax(x, kQK, &min, &max);
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    StoreHalf(dst + q4_1::kD, d);
    StoreHalf(dst + q4_1::kM, min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(TruncToInt8((x[j] - min) * id + 0.5f)));
      const int hi =
          std::min(15, static_cast<int>(TruncToInt8((x[j + kQK / 2] - min) * id + 0.5f)));
      dst[q4_1::kQs + j] = static_cast<uint8_t>(static_cast<uint8_t>(lo) | (hi << 4));
    }
  }
}

void QuantizeWeightQ5_0(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK, dst += q5_0::kBytes) {
    const float d = SignedAbsMax(x, kQK) / -16;
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    StoreHalf(dst + q5_0::kD, d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const auto lo =
          static_cast<uint8_t>(std::min(31, static_cast<int>(TruncToInt8(x[j] * id + 16.5f))));
      const auto hi = static_cast<uint8_t>(
          std::min(31, static_cast<int>(TruncToInt8(x[j + kQK / 2] * id + 16.5f))));
      dst[q5_0::kQs + j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      qh |= ((lo & 0x10u) >> 4) << j;
      qh |= ((hi & 0x10u) >> 4) << (j + kQK / 2);
    }
    std::memcpy(dst + q5_0::kQh, &qh, 4);
  }
}

void QuantizeWeightQ5_1(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK, dst += q5_1::kBytes) {
    float min, max;
    MinMax(x, kQK, &min, &max);
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    StoreHalf(dst + q5_1::kD, d);
    StoreHalf(dst + q5_1::kM, min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const auto lo = static_cast<uint8_t>(TruncToInt8((x[j] - min) * id + 0.5f));
      const auto hi = static_cast<uint8_t>(TruncToInt8((x[j + kQK / 2] - min) * id + 0.5f));
      dst[q5_1::kQs + j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      qh |= ((lo & 0x10u) >> 4) << j;
      qh |= ((hi & 0x10u) >> 4) << (j + kQK / 2);
    }
    std::memcpy(dst + q5_1::kQh, &qh, 4);
  }
}

// Reference Q8_0: d = amax/127, q = roundf(x * (1/d)) (ties away from zero).
void QuantizeWeightQ8_0(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK, dst += q8_0::kBytes) {
    const float d = AbsMax(x, kQK) / ((1 << 7) - 1);
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    StoreHalf(dst + q8_0::kD, d);
    for (int j = 0; j < kQK; ++j)
      dst[q8_0::kQs + j] = static_cast<uint8_t>(TruncToInt8(std::round(x[j] * id)));
  }
}

void QuantizeWeightQ8_1(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK, dst += q8_1::kBytes) {
    const float d = AbsMax(x, kQK) / ((1 << 7) - 1);
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    StoreHalf(dst + q8_1::kD, d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      const int8_t q = TruncToInt8(std::round(x[j] * id));
      dst[q8_1::kQs + j] = static_cast<uint8_t>(q);
      sum += q;
    }
    StoreHalf(dst + q8_1::kS, static_cast<float>(sum) * d);
  }
}

// ---------------------------------------------------------------------------------------------
// Activation quantizers: llama.cpp's x86 quantize_row_q8_0 / q8_1 (AVX path). amax over the
// block, d = amax / 127 stored as fp16, q = round-half-even(x * (127 / amax)).

void QuantizeActQ8_0(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK, dst += q8_0::kBytes) {
    const float amax = AbsMax(x, kQK);
    StoreHalf(dst + q8_0::kD, amax / 127.f);
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    for (int j = 0; j < kQK; ++j)
      dst[q8_0::kQs + j] = static_cast<uint8_t>(RoundHalfEvenToInt8Sat(x[j] * id));
  }
}

// As Q8_0, plus s = fp16(d * sum(q)) with the unrounded d (the AVX2 path sums the int32 lanes).
void QuantizeActQ8_1(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK, dst += q8_1::kBytes) {
    const float amax = AbsMax(x, kQK);
    const float d = amax / 127.f;
    StoreHalf(dst + q8_1::kD, d);
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      const int8_t q = RoundHalfEvenToInt8Sat(x[j] * id);
      dst[q8_1::kQs + j] = static_cast<uint8_t>(q);
      sum += q;
    }
    StoreHalf(dst + q8_1::kS, d * static_cast<float>(sum));
  }
}

// ---------------------------------------------------------------------------------------------
// Dot products: exact int32 sum per block, then lane b % 8 += (d_w * d_x) * isum [+ m_w * s_x].

namespace {

template <int kWBytes, int kXBytes, typename BlockFn>
float DotBlocks(const uint8_t* w, const uint8_t* x, int64_t n, BlockFn block) {
  float lanes[kBlockLanes] = {};
  const int64_t nb = n / kQK;
  for (int64_t b = 0; b < nb; ++b)
    lanes[b % kBlockLanes] += block(w + b * kWBytes, x + b * kXBytes);
  return SumBlockLanes(lanes);
}

const int8_t* Qs8(const uint8_t* blk, int off) {
  return reinterpret_cast<const int8_t*>(blk + off);
}

}  // namespace

float DotQ4_0(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotBlocks<q4_0::kBytes, q8_0::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    const uint8_t* qw = bw + q4_0::kQs;
    const int8_t* qx = Qs8(bx, q8_0::kQs);
    int32_t isum = 0;
    for (int j = 0; j < kQK / 2; ++j)
      isum += ((qw[j] & 0x0F) - 8) * qx[j] + ((qw[j] >> 4) - 8) * qx[j + kQK / 2];
    return (LoadHalf(bw + q4_0::kD) * LoadHalf(bx + q8_0::kD)) * static_cast<float>(isum);
  });
}

float DotQ4_1(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotBlocks<q4_1::kBytes, q8_1::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    const uint8_t* qw = bw + q4_1::kQs;
    const int8_t* qx = Qs8(bx, q8_1::kQs);
    int32_t isum = 0;
    for (int j = 0; j < kQK / 2; ++j)
      isum += (qw[j] & 0x0F) * qx[j] + (qw[j] >> 4) * qx[j + kQK / 2];
    return (LoadHalf(bw + q4_1::kD) * LoadHalf(bx + q8_1::kD)) * static_cast<float>(isum) +
           LoadHalf(bw + q4_1::kM) * LoadHalf(bx + q8_1::kS);
  });
}

float DotQ5_0(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotBlocks<q5_0::kBytes, q8_0::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    const uint8_t* qw = bw + q5_0::kQs;
    const uint32_t qh = LoadU32(bw + q5_0::kQh);
    const int8_t* qx = Qs8(bx, q8_0::kQs);
    int32_t isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      isum += (((qw[j] & 0x0F) | Q5High(qh, j)) - 16) * qx[j];
      isum += (((qw[j] >> 4) | Q5High(qh, j + 16)) - 16) * qx[j + kQK / 2];
    }
    return (LoadHalf(bw + q5_0::kD) * LoadHalf(bx + q8_0::kD)) * static_cast<float>(isum);
  });
}

float DotQ5_1(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotBlocks<q5_1::kBytes, q8_1::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    const uint8_t* qw = bw + q5_1::kQs;
    const uint32_t qh = LoadU32(bw + q5_1::kQh);
    const int8_t* qx = Qs8(bx, q8_1::kQs);
    int32_t isum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      isum += ((qw[j] & 0x0F) | Q5High(qh, j)) * qx[j];
      isum += ((qw[j] >> 4) | Q5High(qh, j + 16)) * qx[j + kQK / 2];
    }
    return (LoadHalf(bw + q5_1::kD) * LoadHalf(bx + q8_1::kD)) * static_cast<float>(isum) +
           LoadHalf(bw + q5_1::kM) * LoadHalf(bx + q8_1::kS);
  });
}

float DotQ8_0(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotBlocks<q8_0::kBytes, q8_0::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    const int8_t* qw = Qs8(bw, q8_0::kQs);
    const int8_t* qx = Qs8(bx, q8_0::kQs);
    int32_t isum = 0;
    for (int j = 0; j < kQK; ++j) isum += qw[j] * qx[j];
    return (LoadHalf(bw + q8_0::kD) * LoadHalf(bx + q8_0::kD)) * static_cast<float>(isum);
  });
}

float DotQ8_1(const uint8_t* w, const uint8_t* x, int64_t n) {
  return DotBlocks<q8_1::kBytes, q8_1::kBytes>(w, x, n, [](const uint8_t* bw, const uint8_t* bx) {
    const int8_t* qw = Qs8(bw, q8_1::kQs);
    const int8_t* qx = Qs8(bx, q8_1::kQs);
    int32_t isum = 0;
    for (int j = 0; j < kQK; ++j) isum += qw[j] * qx[j];
    return (LoadHalf(bw + q8_1::kD) * LoadHalf(bx + q8_1::kD)) * static_cast<float>(isum);
  });
}

}  // namespace shoal::kernels::internal
