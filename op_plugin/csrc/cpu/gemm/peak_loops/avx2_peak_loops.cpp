// The AVX2 loops of peak_loops.h: register-only, and VFMADD231PS ymm on operands loaded from
// L1 as the avx2 micro-kernel loads them. Compiled for AVX2/FMA (the pragma) and called
// only where the CPU has them; no torch or std C++ headers.
#pragma GCC target("avx2,fma")

#include "peak_loops.h"

#include <immintrin.h>
#include <stdint.h>

namespace ascend_ops {
namespace cpu {

float vfmadd231ps_ymm_loop(int64_t iterations) {
  constexpr int kChains = 12;  // FMA latency 4, two issued per cycle: 8 chains needed, 12 kept
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  __m256 a = _mm256_set1_ps(0.999f);
  __m256 b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(a, b, acc[i]);
    __asm__ volatile("" : "+x"(a), "+x"(b));
  }
  __m256 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm256_add_ps(sum, acc[i]);
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
  return _mm_cvtss_f32(_mm_add_ps(half, _mm_movehl_ps(half, half)));
}

float vfmadd231ps_ymm_from_l1_loop(int64_t iterations) {
  // avx2_gemm_kernels.cpp's 6 x 16 micro-kernel on its packed layouts over kSteps K steps: a
  // 6-row A panel (6 KiB) and a 16-column B panel (16 KiB), in L1 after the first pass. One
  // iteration is one K step: two B vectors loaded, each of 6 A values broadcast against both.
  constexpr int kRows = 6;
  constexpr int64_t kSteps = 256;
  alignas(32) float a[kSteps * kRows];
  alignas(32) float b[kSteps * 16];
  for (int64_t i = 0; i < kSteps * kRows; ++i) a[i] = 0.999f;
  for (int64_t i = 0; i < kSteps * 16; ++i) b[i] = 1e-7f;
  __m256 acc[kRows][2];
  // Every loop over the rows unrolled: the accumulators stay in registers.
#pragma GCC unroll 6
  for (int r = 0; r < kRows; ++r) {
    acc[r][0] = _mm256_set1_ps(static_cast<float>(r));
    acc[r][1] = _mm256_set1_ps(static_cast<float>(r));
  }
  for (int64_t it = 0, p = 0; it < iterations; ++it, p = p + 1 == kSteps ? 0 : p + 1) {
    const __m256 b0 = _mm256_load_ps(b + p * 16);
    const __m256 b1 = _mm256_load_ps(b + p * 16 + 8);
#pragma GCC unroll 6
    for (int r = 0; r < kRows; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + p * kRows + r);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int r = 0; r < kRows; ++r) sum = _mm256_add_ps(_mm256_add_ps(sum, acc[r][0]), acc[r][1]);
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
  return _mm_cvtss_f32(_mm_add_ps(half, _mm_movehl_ps(half, half)));
}

}  // namespace cpu
}  // namespace ascend_ops
