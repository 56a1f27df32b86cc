// The AVX512 loops of peak_loops.h: register-only, and VDPBF16PS on operands loaded from L1
// as the avx512bf16 micro-kernel loads them. Compiled for AVX512-F/BF16 (the pragma) and
// called only where the CPU has them; no torch or std C++ headers (avx512_kernels.cpp says why).
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")

#include "peak_loops.h"

#include <immintrin.h>
#include <stdint.h>

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

float vdpbf16ps_zmm_from_l1_loop(int64_t iterations) {
  // avx512_kernels.cpp's micro-kernel on its packed layouts over kPairs K pairs: a 12-row A
  // panel (3 KiB) and a 32-column B panel (8 KiB), in L1 after the first pass. One iteration
  // is one pair: two B vectors loaded, each of 12 A pairs broadcast against both.
  constexpr int kRows = 12;
  constexpr int64_t kPairs = 64;
  alignas(64) uint32_t a[kPairs * kRows];
  alignas(64) uint32_t b[kPairs * 32];
  for (int64_t i = 0; i < kPairs * kRows; ++i) a[i] = 0x3f803f80u;  // bf16 pairs (1, 1)
  for (int64_t i = 0; i < kPairs * 32; ++i) b[i] = 0x00010001u;      // tiny: sums stay finite
  __m512 acc[kRows][2];
  // Every loop over the rows unrolled: the accumulators stay in registers.
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) {
    acc[r][0] = _mm512_set1_ps(static_cast<float>(r));
    acc[r][1] = _mm512_set1_ps(static_cast<float>(r));
  }
  for (int64_t it = 0, p = 0; it < iterations; ++it, p = p + 1 == kPairs ? 0 : p + 1) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b + p * 32);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + p * 32 + 16);
    const uint32_t* ap = a + p * kRows;
#pragma GCC unroll 12
    for (int r = 0; r < kRows; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) sum = _mm512_add_ps(_mm512_add_ps(sum, acc[r][0]), acc[r][1]);
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
