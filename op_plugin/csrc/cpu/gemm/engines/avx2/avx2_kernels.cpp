// AVX2 + FMA implementation of avx2_kernels.h. Compiled for AVX2/FMA (the pragma below)
// and called only after avx2_kernels_supported() said the CPU has them; like
// avx512_kernels.cpp it includes no torch or std C++ headers.
#pragma GCC target("avx2,fma")

#include "avx2_kernels.h"
#include "../avx512bf16/avx512_kernels.h"  // kExpSumBlock (plain C declarations only)

#include <immintrin.h>
#include <string.h>

// SLEEF's vectorised expf for AVX2 (1.0 ULP), exported by libtorch_cpu: the same
// algorithm as the AVX512 kernels' Sleef_expf16_u10.
extern "C" __m256 Sleef_expf8_u10avx2(__m256);

namespace ascend_ops {
namespace cpu {
namespace avx2 {
namespace {

constexpr int64_t kLanes = 8;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Lane i is all ones for i < n (n clamped to [0, 8]).
inline __m256i first_lanes(int64_t n) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(min64(n, kLanes))), index);
}

inline __m256 load_floats(const float* p, int64_t n) {
  return n >= kLanes ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, first_lanes(n));
}

// 8 bf16 widened to fp32 (a bf16 is the top half of an fp32); lanes >= n are zero.
inline __m256 load_bf16(const uint16_t* p, int64_t n) {
  __m128i half;
  if (n >= kLanes) {
    half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  } else {
    uint16_t tail[kLanes] = {0};
    memcpy(tail, p, static_cast<size_t>(n) * sizeof(uint16_t));
    half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(tail));
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}

// bf16(v) rounded to nearest even, NaN to the canonical quiet NaN 0x7FC0 (as c10::BFloat16),
// stored to the first n of 8 lanes.
inline void store_bf16(__m256 v, uint16_t* p, int64_t n) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  rounded = _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), is_nan);
  // packus works within 128-bit lanes: [r0..3, r0..3, r4..7, r4..7]; pick quarters 0 and 2.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(rounded, rounded), 0x08);
  const __m128i half = _mm256_castsi256_si128(packed);
  if (n >= kLanes) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), half);
  } else {
    uint16_t tail[kLanes];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(tail), half);
    memcpy(p, tail, static_cast<size_t>(n) * sizeof(uint16_t));
  }
}

inline float horizontal_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

}  // namespace

void logits_grad_row(const float* src, int64_t cols, bool recompute, float row_max,
                     float inv_sum, float scale, int64_t target, uint16_t* g) {
  const __m256 vmax = _mm256_set1_ps(row_max);
  const __m256 vinv = _mm256_set1_ps(inv_sum);
  const __m256 vscale = _mm256_set1_ps(scale);
  const bool given_times_inv = !recompute && inv_sum != 1.0f;
  for (int64_t j = 0; j < cols; j += kLanes) {
    const int64_t n = cols - j;
    __m256 p = load_floats(src + j, n);
    if (recompute) {
      p = _mm256_mul_ps(Sleef_expf8_u10avx2(_mm256_sub_ps(p, vmax)), vinv);
    } else if (given_times_inv) {
      p = _mm256_mul_ps(p, vinv);
    }
    if (target >= j && target < j + kLanes) {
      const __m256i hit = _mm256_cmpeq_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                             _mm256_set1_epi32(static_cast<int>(target - j)));
      p = _mm256_sub_ps(p, _mm256_and_ps(_mm256_castsi256_ps(hit), _mm256_set1_ps(1.0f)));
    }
    store_bf16(_mm256_mul_ps(p, vscale), g + j, n);
  }
}

void round_to_bf16(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t j = 0; j < n; j += kLanes) {
    store_bf16(load_floats(src + j, n - j), dst + j, n - j);
  }
}

void rescale_bf16(const uint16_t* src, int64_t n, float scale, uint16_t* dst) {
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int64_t j = 0; j < n; j += kLanes) {
    store_bf16(_mm256_mul_ps(load_bf16(src + j, n - j), vscale), dst + j, n - j);
  }
}

float row_max(const float* row, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 m = neg_inf;
  // vmaxps drops a NaN once a later lane compares against it; torch.amax returns NaN for a
  // row holding one, so NaN lanes are tracked apart.
  __m256 nan = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; j += kLanes) {
    const __m256 lanes = _mm256_castsi256_ps(first_lanes(n - j));
    const __m256 v = _mm256_blendv_ps(neg_inf, load_floats(row + j, n - j), lanes);
    m = _mm256_max_ps(m, v);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  return _mm256_movemask_ps(nan) ? __builtin_nanf("") : horizontal_max(m);
}

double exp_sum(const float* row, int64_t n, float row_max, float* exps) {
  const __m256 vmax = _mm256_set1_ps(row_max);
  double sum = 0.0;
  for (int64_t start = 0; start < n; start += kExpSumBlock) {
    const int64_t stop = min64(n, start + kExpSumBlock);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = start; j < stop; j += kLanes) {
      const __m256 lanes = _mm256_castsi256_ps(first_lanes(stop - j));
      const __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(load_floats(row + j, stop - j), vmax));
      acc = _mm256_add_ps(acc, _mm256_and_ps(e, lanes));  // lanes past the row add 0
      if (exps != nullptr) {
        _mm256_maskstore_ps(exps + j, _mm256_castps_si256(lanes), e);
      }
    }
    sum += horizontal_sum(acc);
  }
  return sum;
}

}  // namespace avx2
}  // namespace cpu
}  // namespace ascend_ops
