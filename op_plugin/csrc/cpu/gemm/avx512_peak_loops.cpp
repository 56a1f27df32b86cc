// The AVX512 register-only loops of peak_loops.h. Compiled for AVX512-F/BF16 (the pragma) and
// called only where the CPU has them; no torch or std C++ headers (avx512_kernels.cpp says why).
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")

#include "peak_loops.h"

#include <immintrin.h>

namespace ascend_ops {
namespace cpu {

// 12 chains: VDPBF16PS and VFMADD231PS have a latency of 4-6 cycles and 1-2 issued per
// cycle, so 12 independent sums keep the units busy on every x86 core measured.
constexpr int kChains = 12;

float vdpbf16ps_zmm_loop(int64_t iterations) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);  // bf16 pairs (1, 1)
  __m512bh b = (__m512bh)_mm512_set1_epi32(0x00010001);  // tiny: the sums stay finite
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    __asm__ volatile("" : "+v"(a), "+v"(b));  // the operands stay in registers, unknown
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return _mm512_reduce_add_ps(sum);
}

float vfmadd231ps_zmm_loop(int64_t iterations) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512 a = _mm512_set1_ps(0.999f);
  __m512 b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
    __asm__ volatile("" : "+v"(a), "+v"(b));
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return _mm512_reduce_add_ps(sum);
}

}  // namespace cpu
}  // namespace ascend_ops
