// AVX2 + FMA implementation of avx2_gemm_kernels.h. Compiled for AVX2/FMA (the pragma
// below) and called only after avx2_kernels_supported() said the CPU has them; like
// avx512_kernels.cpp it includes no torch or std C++ headers.
#pragma GCC target("avx2,fma")

#include "avx2_gemm_kernels.h"

#include <immintrin.h>
#include <string.h>

namespace ascend_ops {
namespace cpu {
namespace avx2 {
namespace {

constexpr int64_t kMr = kAvx2Mr;
constexpr int64_t kNr = kAvx2Nr;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline float widen(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

// 8 consecutive bf16 widened to fp32.
inline __m256 widen8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Transposes the 8 x 8 fp32 block held in r[0..7] (row i in r[i]).
inline void transpose8(__m256 r[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  __m256 s[8];
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
  }
}

// C[6, 16] (= or +=) one packed A panel @ one packed B panel, over kc steps: the 12
// accumulators stay in registers for the whole K loop.
inline void micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                         bool accumulate) {
  // The C tile's lines are fetched while the K loop runs: by the time the sums are added
  // and stored they are in L1 (measured 8-9 % faster on whole GEMMs, AMD EPYC, 2 threads:
  // median of paired runs, 10 and 40 pairs). A prefetch never faults.
  for (int64_t r = 0; r < kMr; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kNr - 1), _MM_HINT_T0);
  }
  __m256 sums[kMr][2];
#pragma GCC unroll 6
  for (int r = 0; r < kMr; ++r) {
    sums[r][0] = sums[r][1] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b + p * kNr);
    const __m256 b1 = _mm256_loadu_ps(b + p * kNr + 8);
    // Fully unrolled, so the 12 sums live in registers for the whole loop.
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + p * kMr + r);
      sums[r][0] = _mm256_fmadd_ps(av, b0, sums[r][0]);
      sums[r][1] = _mm256_fmadd_ps(av, b1, sums[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < kMr; ++r) {
    float* row = c + r * ldc;
    __m256 v0 = sums[r][0];
    __m256 v1 = sums[r][1];
    if (accumulate) {
      v0 = _mm256_add_ps(_mm256_loadu_ps(row), v0);
      v1 = _mm256_add_ps(_mm256_loadu_ps(row + 8), v1);
    }
    _mm256_storeu_ps(row, v0);
    _mm256_storeu_ps(row + 8, v1);
  }
}

}  // namespace

void pack_a(Bf16View a, int64_t rows, int64_t k0, int64_t kc, float* out) {
  for (int64_t i0 = 0; i0 < rows; i0 += kMr) {
    float* dst = out + (i0 / kMr) * kc * kMr;
    const int64_t mr = min64(kMr, rows - i0);
    const uint16_t* base = a.data + i0 * a.row_stride + k0 * a.col_stride;
    int64_t p = 0;
    if (a.col_stride == 1) {
      // Row-major A (x, G): 8 K steps of each row, transposed in registers; each store
      // writes 8 lanes, of which the next step's store overwrites the last two.
      for (; p + 8 <= kc; p += 8) {
        __m256 r[8];
        for (int64_t i = 0; i < 8; ++i) {
          r[i] = i < mr ? widen8(base + i * a.row_stride + p) : _mm256_setzero_ps();
        }
        transpose8(r);
        for (int64_t q = 0; q < 8; ++q) {
          _mm256_storeu_ps(dst + (p + q) * kMr, r[q]);
        }
      }
    }
    // The rest (a column-major A such as G.T: the panel's values of a step are adjacent).
    for (; p < kc; ++p) {
      for (int64_t r = 0; r < kMr; ++r) {
        dst[p * kMr + r] = r < mr ? widen(base[r * a.row_stride + p * a.col_stride]) : 0.0f;
      }
    }
  }
}

void pack_b(Bf16View b, int64_t k0, int64_t kc, int64_t cols, float* out) {
  for (int64_t j0 = 0; j0 < cols; j0 += kNr) {
    float* dst = out + (j0 / kNr) * kc * kNr;
    const int64_t nr = min64(kNr, cols - j0);
    const uint16_t* base = b.data + k0 * b.row_stride + j0 * b.col_stride;
    int64_t p = 0;
    if (nr == kNr && b.col_stride == 1) {
      // Row-major B (W, x): each step's 16 values are adjacent.
      for (; p < kc; ++p) {
        _mm256_storeu_ps(dst + p * kNr, widen8(base + p * b.row_stride));
        _mm256_storeu_ps(dst + p * kNr + 8, widen8(base + p * b.row_stride + 8));
      }
    } else if (nr == kNr && b.row_stride == 1) {
      // Column-major B (W.T): 8 K steps of 8 columns at a time, transposed in registers.
      for (; p + 8 <= kc; p += 8) {
        for (int64_t half = 0; half < 2; ++half) {
          __m256 r[8];
          for (int64_t j = 0; j < 8; ++j) {
            r[j] = widen8(base + (half * 8 + j) * b.col_stride + p);
          }
          transpose8(r);
          for (int64_t q = 0; q < 8; ++q) {
            _mm256_storeu_ps(dst + (p + q) * kNr + half * 8, r[q]);
          }
        }
      }
    }
    for (; p < kc; ++p) {
      for (int64_t j = 0; j < kNr; ++j) {
        dst[p * kNr + j] = j < nr ? widen(base[p * b.row_stride + j * b.col_stride]) : 0.0f;
      }
    }
  }
}

void gemm_packed(int64_t rows, int64_t cols, int64_t kc, const float* a_packed,
                 const float* b_packed, float* c, int64_t ldc, bool accumulate) {
  if (rows <= 0 || cols <= 0) {
    return;
  }
  alignas(32) float tile[kMr * kNr];  // a partial micro-tile, summed whole, stored in part
  // Column panel outside, row panels inside: one B panel (kc x 16) is read by every A
  // panel of the block, which stream past it from L2. While it is, the next B panel is
  // fetched into L1, an equal share of its lines before each micro-kernel call; without
  // that the first call on each panel waits for its lines from L3. Measured on an AMD
  // EPYC (AVX2 only, 2 threads), with against without, median time ratio of alternating
  // pairs: 0.94-0.96 on the training step's three products alone, 0.90 on the whole step
  // at (4096, 4096, 16000). Prefetching the A panels too gained nothing.
  static_assert(kNr * sizeof(float) == 64, "a B panel's K step is one cache line");
  const int64_t panel_lines = kc;
  const int64_t row_panels = (rows + kMr - 1) / kMr;
  const int64_t lines_per_call = (panel_lines + row_panels - 1) / row_panels;
  for (int64_t j = 0; j < cols; j += kNr) {
    const int64_t nr = min64(kNr, cols - j);
    const float* b = b_packed + (j / kNr) * kc * kNr;
    const char* next_b = j + kNr < cols ? reinterpret_cast<const char*>(b + kc * kNr) : nullptr;
    for (int64_t i = 0; i < rows; i += kMr) {
      const int64_t mr = min64(kMr, rows - i);
      const float* a = a_packed + (i / kMr) * kc * kMr;
      if (next_b != nullptr) {
        const int64_t first = (i / kMr) * lines_per_call;
        const int64_t last = min64(panel_lines, first + lines_per_call);
        for (int64_t line = first; line < last; ++line) {
          _mm_prefetch(next_b + line * 64, _MM_HINT_T0);
        }
      }
      if (mr == kMr && nr == kNr) {
        micro_kernel(kc, a, b, c + i * ldc + j, ldc, accumulate);
        continue;
      }
      micro_kernel(kc, a, b, tile, kNr, false);
      for (int64_t r = 0; r < mr; ++r) {
        float* row = c + (i + r) * ldc + j;
        for (int64_t q = 0; q < nr; ++q) {
          row[q] = accumulate ? row[q] + tile[r * kNr + q] : tile[r * kNr + q];
        }
      }
    }
  }
}

}  // namespace avx2
}  // namespace cpu
}  // namespace ascend_ops
