// The AVX2 register-only loop of peak_loops.h. Compiled for AVX2/FMA (the pragma) and called
// only where the CPU has them; no torch or std C++ headers.
#pragma GCC target("avx2,fma")

#include "peak_loops.h"

#include <immintrin.h>

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

}  // namespace cpu
}  // namespace ascend_ops
