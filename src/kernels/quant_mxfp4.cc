// Reference kernels of MXFP4 (32 E2M1 values sharing one E8M0 exponent): dequantization,
// ggml's quantize_row_mxfp4_ref and the dot product with Q8_0 activations.
#include <cmath>

#include "kernels/quant_internal.h"

namespace shoal::kernels::internal {
namespace {

// ggml's best_index_mxfp4: the first code whose value kvalues[i] * e is nearest to x.
int BestMxfp4Index(float x, float e) {
  int best = 0;
  float best_err = std::fabs(kMxfp4Values[0] * e - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kMxfp4Values[i] * e - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

// (uint8_t)f as GCC compiles it on x86: cvttss2si, then the low byte.
uint8_t TruncToUint8(float f) {
  if (!(f > -2147483648.f && f < 2147483648.f)) return 0;
  return static_cast<uint8_t>(static_cast<int32_t>(f));
}

}  // namespace

void DequantizeMxfp4(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, src += mxfp4::kBytes, dst += kQK) {
    const float d = E8m0ToFp32Half(src[mxfp4::kE]);
    const uint8_t* qs = src + mxfp4::kQs;
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>(kMxfp4Values[qs[j] & 0x0F]) * d;
      dst[j + kQK / 2] = static_cast<float>(kMxfp4Values[qs[j] >> 4]) * d;
    }
  }
}

void QuantizeWeightMxfp4(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK, dst += mxfp4::kBytes) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    // The largest E2M1 magnitude is 6 = 1.5 * 2^2: the shared exponent is floor(log2 amax) - 2.
    const uint8_t e = amax > 0.0f ? TruncToUint8(std::floor(std::log2(amax)) - 2 + 127) : 0;
    const float d = E8m0ToFp32Half(e);
    dst[mxfp4::kE] = e;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = BestMxfp4Index(x[j], d), hi = BestMxfp4Index(x[j + kQK / 2], d);
      dst[mxfp4::kQs + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

float DotMxfp4(const uint8_t* w, const uint8_t* x, int64_t n) {
  float lanes[kBlockLanes] = {};
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* bw = w + b * mxfp4::kBytes;
    const uint8_t* bx = x + b * q8_0::kBytes;
    const uint8_t* qw = bw + mxfp4::kQs;
    const int8_t* qx = reinterpret_cast<const int8_t*>(bx + q8_0::kQs);
    int32_t isum = 0;
    for (int j = 0; j < kQK / 2; ++j)
      isum += kMxfp4Values[qw[j] & 0x0F] * qx[j] + kMxfp4Values[qw[j] >> 4] * qx[j + kQK / 2];
    lanes[b % kBlockLanes] +=
        (E8m0ToFp32Half(bw[mxfp4::kE]) * LoadHalf(bx + q8_0::kD)) * static_cast<float>(isum);
  }
  return SumBlockLanes(lanes);
}

}  // namespace shoal::kernels::internal
