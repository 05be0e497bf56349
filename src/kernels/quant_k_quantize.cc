// ggml's reference K-quant quantizers (quantize_row_q{2,3,4,5,6}_K_ref) with their iterative
// scale searches (make_qx_quants, make_q3_quants, make_qkx2_quants), bit-exact: every float
// expression keeps ggml's operand order and types, and no multiply-add is fused.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant_internal.h"

namespace shoal::kernels::internal {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS: below it a group is all zero

// The value of largest magnitude, keeping its sign (first one on ties).
float SignedAbsMax(int n, const float* x, float* amax_out) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  *amax_out = amax;
  return max;
}

int Clamp(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

// make_qx_quants with rmse_type 1 and no importance weights (w = x^2): symmetric quants in
// [-nmax, nmax), stored + nmax; tries 18 scales around nmax / max and keeps the best fit.
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  float amax;
  const float max = SignedAbsMax(n, x, &amax);
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(nmax + Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// make_q3_quants with do_rmse: start from nmax / max, then up to 5 passes of coordinate descent
// on each quant (weights x^2). L gets quants + nmax.
float MakeQ3Quants(int n, int nmax, const float* x, int8_t* L) {
  float amax;
  const float max = SignedAbsMax(n, x, &amax);
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
      if (slx > 0) {
        float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
        const int new_l = Clamp(NearestInt(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// make_qkx2_quants: asymmetric quants in [0, nmax] with a min <= 0, searching nstep + 1 scales
// (rmin + rdelta * is + nmax) / (max - min) by weighted least squares. *the_min gets -min.
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                     float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                     bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::memset(L, 0, static_cast<size_t>(n));
    *the_min = -min;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i], fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        std::memcpy(L, Laux, static_cast<size_t>(n));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Q2_K / Q3_K: four 2-bit quants per byte, element j + 32 k of each 128 in bits 2k.
void PackQ2Bits(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQKK; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
}

// Q4_K / Q5_K: 8 scales and 8 mins of 6 bits packed into 12 bytes (inverse of ScaleMinK4).
void PackScaleMinK4(const uint8_t ls[8], const uint8_t lm[8], uint8_t* scales) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] = static_cast<uint8_t>(scales[j - 4] | ((ls[j] >> 4) << 6));
      scales[j] = static_cast<uint8_t>(scales[j] | ((lm[j] >> 4) << 6));
    }
  }
}

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): per 32-group scale/min search, 6-bit scales,
// then requantization with the stored scales. L gets 256 quants in [0, nmax].
void QuantizeQ45KBlock(const float* x, int nmax, float rmin, int nstep, uint8_t* blk_d,
                       uint8_t* blk_dmin, uint8_t* blk_scales, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = MakeQkx2Quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                               0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_min * mins[j])));
  }
  PackScaleMinK4(ls, lm, blk_scales);
  StoreHalf(blk_d, max_scale / 63.f);
  StoreHalf(blk_dmin, max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    ScaleMinK4(j, blk_scales, &sc, &m);
    const float d = LoadHalf(blk_d) * static_cast<float>(sc);
    if (d == 0.f) continue;
    const float dm = LoadHalf(blk_dmin) * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii)
      L[32 * j + ii] = static_cast<uint8_t>(Clamp(NearestInt((x[32 * j + ii] + dm) / d), 0, nmax));
  }
}

}  // namespace

void QuantizeWeightQ2_K(const float* x, uint8_t* dst, int64_t n) {
  constexpr float kQ4Scale = 15.f;  // 4-bit scales and mins
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, dst += q2_k::kBytes) {
    uint8_t L[kQKK], Laux[16];
    float weights[16], mins[16], scales[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = MakeQkx2Quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    uint8_t* sc = dst + q2_k::kScales;
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < 16; ++j) sc[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
      StoreHalf(dst + q2_k::kD, max_scale / kQ4Scale);
    } else {
      std::memset(sc, 0, 16);
      StoreHalf(dst + q2_k::kD, 0.f);
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < 16; ++j)
        sc[j] = static_cast<uint8_t>(sc[j] | (NearestInt(iscale * mins[j]) << 4));
      StoreHalf(dst + q2_k::kDmin, max_min / kQ4Scale);
    } else {
      StoreHalf(dst + q2_k::kDmin, 0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = LoadHalf(dst + q2_k::kD) * static_cast<float>(sc[j] & 0xF);
      if (d == 0.f) continue;
      const float dm = LoadHalf(dst + q2_k::kDmin) * static_cast<float>(sc[j] >> 4);
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = static_cast<uint8_t>(Clamp(NearestInt((x[16 * j + ii] + dm) / d), 0, 3));
    }
    PackQ2Bits(L, dst + q2_k::kQs);
  }
}

void QuantizeWeightQ3_K(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, dst += q3_k::kBytes) {
    int8_t L[kQKK];
    float scales[16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = MakeQ3Quants(16, 4, x + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    uint8_t* ps = dst + q3_k::kScales;
    std::memset(ps, 0, 12);
    if (max_scale != 0.f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int8_t l = static_cast<int8_t>(NearestInt(iscale * scales[j]));
        l = static_cast<int8_t>(Clamp(l, -32, 31) + 32);
        if (j < 8) {
          ps[j] = static_cast<uint8_t>(l & 0xF);
        } else {
          ps[j - 8] = static_cast<uint8_t>(ps[j - 8] | ((l & 0xF) << 4));
        }
        l = static_cast<int8_t>(l >> 4);
        ps[j % 4 + 8] = static_cast<uint8_t>(ps[j % 4 + 8] | (l << (2 * (j / 4))));
      }
      StoreHalf(dst + q3_k::kD, 1 / iscale);
    } else {
      StoreHalf(dst + q3_k::kD, 0.f);
    }
    int8_t sc[16];
    UnpackQ3KScales(ps, sc);
    for (int j = 0; j < 16; ++j) {
      const float d = LoadHalf(dst + q3_k::kD) * static_cast<float>(sc[j]);
      if (d == 0.f) continue;
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = static_cast<int8_t>(Clamp(NearestInt(x[16 * j + ii] / d), -4, 3) + 4);
    }
    // High bit of element j: bit j / 32 of hmask[j % 32]; the low 2 bits go to qs.
    uint8_t* hmask = dst + q3_k::kHmask;
    std::memset(hmask, 0, kQKK / 8);
    uint8_t low[kQKK];
    for (int j = 0; j < kQKK; ++j) {
      int l = L[j];
      if (l > 3) {
        hmask[j % 32] = static_cast<uint8_t>(hmask[j % 32] | (1 << (j / 32)));
        l -= 4;
      }
      low[j] = static_cast<uint8_t>(l);
    }
    PackQ2Bits(low, dst + q3_k::kQs);
  }
}

void QuantizeWeightQ4_K(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, dst += q4_k::kBytes) {
    uint8_t L[kQKK];
    QuantizeQ45KBlock(x, 15, -1.f, 20, dst + q4_k::kD, dst + q4_k::kDmin, dst + q4_k::kScales, L);
    uint8_t* q = dst + q4_k::kQs;
    for (int j = 0; j < kQKK; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

void QuantizeWeightQ5_K(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, dst += q5_k::kBytes) {
    uint8_t L[kQKK];
    QuantizeQ45KBlock(x, 31, -0.5f, 15, dst + q5_k::kD, dst + q5_k::kDmin, dst + q5_k::kScales, L);
    uint8_t* qh = dst + q5_k::kQh;
    uint8_t* ql = dst + q5_k::kQs;
    std::memset(qh, 0, kQKK / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n64 = 0; n64 < kQKK; n64 += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n64 + j], l2 = L[n64 + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2);
      m2 = static_cast<uint8_t>(m2 << 2);
    }
  }
}

void QuantizeWeightQ6_K(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, dst += q6_k::kBytes) {
    int8_t L[kQKK];
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib);
      const float abs_scale = std::fabs(scales[ib]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(dst, 0, q6_k::kBytes);
      continue;
    }
    const float iscale = -128.f / max_scale;
    StoreHalf(dst + q6_k::kD, 1 / iscale);
    int8_t* sc = reinterpret_cast<int8_t*>(dst + q6_k::kScales);
    for (int ib = 0; ib < 16; ++ib)
      sc[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = LoadHalf(dst + q6_k::kD) * static_cast<float>(sc[j]);
      if (d == 0.f) continue;
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = static_cast<int8_t>(Clamp(NearestInt(x[16 * j + ii] / d), -32, 31) + 32);
    }
    uint8_t* ql = dst + q6_k::kQl;
    uint8_t* qh = dst + q6_k::kQh;
    for (int j = 0; j < kQKK; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int a = L[j + l], b = L[j + l + 32], c = L[j + l + 64], e = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((a & 0xF) | ((c & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((b & 0xF) | ((e & 0xF) << 4));
        qh[l] =
            static_cast<uint8_t>((a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6));
      }
    }
  }
}

}  // namespace shoal::kernels::internal
