// AVX512-BF16 implementation of avx512_kernels.h. This whole file is compiled for
// AVX512-F/BW/VL/BF16 (the pragma below); the library calls into it only after
// avx512_kernels_supported() said the CPU has them. It includes no torch or std C++
// headers, so no inline function compiled here can be picked by the linker for code
// that runs on other CPUs.
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
// GCC's own intrinsic headers trip this warning (their `__Y = __Y` placeholders).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "avx512_kernels.h"

#include <immintrin.h>
#include <string.h>

// SLEEF's vectorised expf (1.0 ULP), exported by libtorch_cpu.
extern "C" __m512 Sleef_expf16_u10(__m512);

namespace ascend_ops {
namespace cpu {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// 16 bf16 (or the first lanes of `mask`) widened to fp32: a bf16 is the top half of an fp32.
inline __m512 load_bf16(const uint16_t* p, __mmask16 mask) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

inline uint32_t load_pair(const uint16_t* p) {
  uint32_t word;
  memcpy(&word, p, sizeof(word));
  return word;
}

// C[mr, nr] (= or +=) one packed A panel (kMr rows) @ one packed B panel (kNr columns)
// over `pairs` K pairs. The 24 accumulators stay in registers for the whole K loop; rows
// >= mr and columns >= nr are computed (from the panels' zero padding) but not stored.
// `next_c`, the C tile the following call updates, is fetched while this one runs: its
// sums are added to C only at the end, by which time its lines are in L1.
inline void micro_kernel(int64_t pairs, const uint32_t* a, const uint32_t* bp, float* c,
                         int64_t ldc, int64_t mr, int64_t nr, bool accumulate,
                         const float* next_c) {
  __m512 acc[kMr][2];
#pragma GCC unroll 12
  for (int r = 0; r < kMr; ++r) {
    acc[r][0] = _mm512_setzero_ps();
    acc[r][1] = _mm512_setzero_ps();
  }
  if (next_c != nullptr) {
    for (int64_t r = 0; r < kMr; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(next_c + r * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(next_c + r * ldc + 16), _MM_HINT_T0);
    }
  }
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + p * kNr);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + p * kNr + 16);
    const uint32_t* ap = a + p * kMr;
#pragma GCC unroll 12
    for (int r = 0; r < kMr; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  const __mmask16 m0 = first_lanes(nr);
  const __mmask16 m1 = nr > 16 ? first_lanes(nr - 16) : static_cast<__mmask16>(0);
  for (int64_t r = 0; r < mr; ++r) {
    float* row = c + r * ldc;
    __m512 v0 = acc[r][0];
    __m512 v1 = acc[r][1];
    if (accumulate) {
      v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, row), v0);
      v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, row + 16), v1);
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

// Transposes a 16 x 16 block of 32-bit words held in r[0..15] (row i in r[i]).
inline void transpose_16x16_words(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // r[4g + c] now holds, in its 128-bit lane L, column 4L + c of rows 4g..4g+3: two
  // lane shuffles put each column's four row groups together.
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

}  // namespace

void pack_a(Bf16View a, int64_t rows, int64_t k0, int64_t kc, uint32_t* out) {
  const int64_t pairs = (kc + 1) / 2;
  const int64_t full_pairs = kc / 2;
  const int64_t panels = (rows + kMr - 1) / kMr;
  const __mmask16 panel_words = first_lanes(kMr);
  for (int64_t panel = 0; panel < panels; ++panel) {
    uint32_t* dst = out + panel * pairs * kMr;
    const int64_t r0 = panel * kMr;
    const int64_t mr = min64(kMr, rows - r0);
    const uint16_t* base = a.data + r0 * a.row_stride + k0 * a.col_stride;
    int64_t p = 0;
    if (a.col_stride == 1) {
      // Row-major A (x, G, a transposed slab): 16 pairs of each row are 16 words; a 16 x 16
      // transpose of words gives each pair's kMr rows side by side (rows past mr are zero).
      for (; p < full_pairs; p += 16) {
        const __mmask16 count = first_lanes(full_pairs - p);
        __m512i r[16];
        for (int64_t i = 0; i < 16; ++i) {
          r[i] = i < mr ? _mm512_maskz_loadu_epi32(count, base + i * a.row_stride + 2 * p)
                        : _mm512_setzero_si512();
        }
        transpose_16x16_words(r);
        for (int64_t q = 0; q < min64(16, full_pairs - p); ++q) {
          _mm512_mask_storeu_epi32(dst + (p + q) * kMr, panel_words, r[q]);
        }
      }
      p = full_pairs;
    } else if (a.row_stride == 1) {
      // Column-major A (G.T as it lies): a pair is two rows of the storage, interleaved.
      const __mmask32 lanes = static_cast<__mmask32>((1u << mr) - 1);
      alignas(64) uint16_t index[32];
      for (int j = 0; j < 16; ++j) {
        index[2 * j] = static_cast<uint16_t>(j);
        index[2 * j + 1] = static_cast<uint16_t>(32 + j);
      }
      const __m512i interleave = _mm512_load_si512(index);
      for (; p < full_pairs; ++p) {
        const uint16_t* k_row = base + 2 * p * a.col_stride;
        const __m512i x0 = _mm512_maskz_loadu_epi16(lanes, k_row);
        const __m512i x1 = _mm512_maskz_loadu_epi16(lanes, k_row + a.col_stride);
        _mm512_mask_storeu_epi32(dst + p * kMr, panel_words,
                                 _mm512_permutex2var_epi16(x0, interleave, x1));
      }
    }
    // Any other strides, and an odd K's last pair (its high half 0): element by element.
    for (; p < pairs; ++p) {
      for (int64_t r = 0; r < kMr; ++r) {
        uint32_t word = 0;
        if (r < mr) {
          const uint16_t* src = base + r * a.row_stride + 2 * p * a.col_stride;
          word = src[0] | (2 * p + 1 < kc ? static_cast<uint32_t>(src[a.col_stride]) << 16 : 0u);
        }
        dst[p * kMr + r] = word;
      }
    }
  }
}

void pack_a_rows(Bf16View a, int64_t rows, int64_t k0, int64_t kc, int64_t row_align,
                 int64_t pairs_pad, uint32_t* out) {
  const int64_t padded_rows = (rows + row_align - 1) / row_align * row_align;
  const uint16_t* base = a.data + k0 * a.col_stride;
  if (a.col_stride == 1) {
    // Row-major A (x, G): a row's pairs are its bf16 values as they lie, 32 per store.
    for (int64_t r = 0; r < padded_rows; ++r) {
      const uint16_t* src = base + r * a.row_stride;
      uint32_t* dst = out + r * pairs_pad;
      for (int64_t p = 0; p < pairs_pad; p += 16) {
        const int64_t left = r < rows ? kc - 2 * p : 0;
        const __mmask32 lanes = left >= 32  ? static_cast<__mmask32>(0xFFFFFFFFu)
                                : left <= 0 ? static_cast<__mmask32>(0)
                                            : static_cast<__mmask32>((1u << left) - 1);
        _mm512_storeu_si512(dst + p, _mm512_maskz_loadu_epi16(lanes, src + 2 * p));
      }
    }
    return;
  }
  if (a.row_stride == 1) {
    // Column-major A (G.T as it lies): 16 rows of one K element are 16 consecutive values.
    // Each pair of K rows gives 16 words (one per row); 16 pairs of them, transposed, give
    // 16 pairs of each of the 16 rows.
    for (int64_t r0 = 0; r0 < padded_rows; r0 += 16) {
      const __mmask16 row_lanes = first_lanes(rows - r0 > 0 ? rows - r0 : 0);
      for (int64_t p0 = 0; p0 < pairs_pad; p0 += 16) {
        __m512i words[16];
        for (int64_t q = 0; q < 16; ++q) {
          const int64_t e = 2 * (p0 + q);
          const uint16_t* k_row = base + r0 + e * a.col_stride;
          const __m512i lo = e < kc ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(row_lanes, k_row))
                                    : _mm512_setzero_si512();
          const __m512i hi = e + 1 < kc
                                 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(row_lanes, k_row + a.col_stride))
                                 : _mm512_setzero_si512();
          words[q] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
        }
        transpose_16x16_words(words);
        for (int64_t r = 0; r < 16; ++r) {
          _mm512_storeu_si512(out + (r0 + r) * pairs_pad + p0, words[r]);
        }
      }
    }
    return;
  }
  // Any other strides: element by element.
  for (int64_t r = 0; r < padded_rows; ++r) {
    for (int64_t p = 0; p < pairs_pad; ++p) {
      uint32_t word = 0;
      if (r < rows && 2 * p < kc) {
        const uint16_t* src = base + r * a.row_stride + 2 * p * a.col_stride;
        word = src[0] | (2 * p + 1 < kc ? static_cast<uint32_t>(src[a.col_stride]) << 16 : 0u);
      }
      out[r * pairs_pad + p] = word;
    }
  }
}

void pack_b(Bf16View b, int64_t k0, int64_t kc, int64_t cols, uint32_t* out) {
  const int64_t pairs = (kc + 1) / 2;
  const int64_t full_pairs = kc / 2;
  const int64_t panels = (cols + kNr - 1) / kNr;
  // Interleaves two 32-column rows of B into 32 pairs: lane 2j <- row0[j], 2j+1 <- row1[j].
  alignas(64) uint16_t lo_index[32], hi_index[32];
  for (int j = 0; j < 16; ++j) {
    lo_index[2 * j] = static_cast<uint16_t>(j);
    lo_index[2 * j + 1] = static_cast<uint16_t>(32 + j);
    hi_index[2 * j] = static_cast<uint16_t>(16 + j);
    hi_index[2 * j + 1] = static_cast<uint16_t>(48 + j);
  }
  const __m512i lo = _mm512_load_si512(lo_index);
  const __m512i hi = _mm512_load_si512(hi_index);

  // B the transpose of a row-major matrix (weight.T): a column's K pairs are consecutive
  // 32-bit words, so a panel is a transpose of words, done 16 x 16 in registers.
  const bool words_in_columns = b.row_stride == 1 && b.col_stride % 2 == 0 && k0 % 2 == 0 &&
                                reinterpret_cast<uintptr_t>(b.data) % alignof(uint32_t) == 0;
  // Row-major B: pairs outside, panels inside, so each pair of rows is read once, whole
  // (panel by panel it would be read 64 bytes at a time across all K rows).
  const int64_t full_panels = b.col_stride == 1 && !words_in_columns ? cols / kNr : 0;
  for (int64_t p = 0; p < pairs && full_panels > 0; ++p) {
    const uint16_t* row0 = b.data + (k0 + 2 * p) * b.row_stride;
    const bool second = 2 * p + 1 < kc;
    for (int64_t panel = 0; panel < full_panels; ++panel) {
      uint32_t* dst = out + panel * pairs * kNr + p * kNr;
      const __m512i x0 = _mm512_loadu_si512(row0 + panel * kNr);
      const __m512i x1 = second ? _mm512_loadu_si512(row0 + b.row_stride + panel * kNr)
                                : _mm512_setzero_si512();
      _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(x0, lo, x1));
      _mm512_storeu_si512(dst + 16, _mm512_permutex2var_epi16(x0, hi, x1));
    }
  }
  for (int64_t panel = full_panels; panel < panels; ++panel) {
    uint32_t* dst = out + panel * pairs * kNr;
    const int64_t n0 = panel * kNr;
    const int64_t width = min64(kNr, cols - n0);
    if (words_in_columns) {
      for (int64_t p0 = 0; p0 < full_pairs; p0 += 16) {
        const int64_t count = min64(16, full_pairs - p0);
        for (int64_t j0 = 0; j0 < kNr; j0 += 16) {
          __m512i r[16];
          for (int64_t i = 0; i < 16; ++i) {
            const int64_t j = j0 + i;
            // A panel reads 32 rows of W (H apart: a page or more for H >= 2048) 64 bytes at
            // a time, more streams than the hardware prefetchers follow; each row's line two
            // steps ahead is asked for. Measured (perf samples, the logits product at
            // (2048, 2048, 16384) on AMD EPYC Zen 4): pack_b 4.8-4.9 % of the samples
            // without, 3.7 % with, the micro-kernel's share the same.
            if (j < width && p0 + 32 < full_pairs) {
              _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<const uint32_t*>(
                               b.data + (n0 + j) * b.col_stride + k0) + p0 + 32),
                           _MM_HINT_T0);
            }
            r[i] = j < width ? _mm512_maskz_loadu_epi32(
                                   first_lanes(count),
                                   reinterpret_cast<const uint32_t*>(
                                       b.data + (n0 + j) * b.col_stride + k0) + p0)
                             : _mm512_setzero_si512();
          }
          transpose_16x16_words(r);
          for (int64_t q = 0; q < count; ++q) {
            _mm512_storeu_si512(dst + (p0 + q) * kNr + j0, r[q]);
          }
        }
      }
      if (pairs != full_pairs) {  // odd K: the last pair's high half is 0
        for (int64_t j = 0; j < kNr; ++j) {
          dst[full_pairs * kNr + j] = j < width ? b.data[(n0 + j) * b.col_stride + k0 + kc - 1] : 0;
        }
      }
      continue;
    }
    for (int64_t j = 0; j < kNr; ++j) {
      if (j >= width) {
        for (int64_t p = 0; p < pairs; ++p) dst[p * kNr + j] = 0;
        continue;
      }
      const uint16_t* src = b.data + k0 * b.row_stride + (n0 + j) * b.col_stride;
      const int64_t rs = b.row_stride;
      if (rs == 1) {
        for (int64_t p = 0; p < full_pairs; ++p) dst[p * kNr + j] = load_pair(src + 2 * p);
      } else {
        for (int64_t p = 0; p < full_pairs; ++p) {
          dst[p * kNr + j] = src[2 * p * rs] | static_cast<uint32_t>(src[(2 * p + 1) * rs]) << 16;
        }
      }
      if (pairs != full_pairs) dst[full_pairs * kNr + j] = src[(kc - 1) * rs];
    }
  }
}

void gemm_packed(int64_t rows, int64_t cols, int64_t pairs, const uint32_t* a_packed,
                 const uint32_t* b_packed, float* c, int64_t ldc, bool accumulate) {
  // Row panels outside, column panels inside: the A panel (kMr x K block) is read from L1 by
  // every B panel of the block, which stream past it from L2 / L3 (prefetched by the
  // hardware: both panels are read in address order).
  for (int64_t ir = 0; ir < rows; ir += kMr) {
    const int64_t mr = min64(kMr, rows - ir);
    const uint32_t* ap = a_packed + (ir / kMr) * pairs * kMr;
    for (int64_t jr = 0; jr < cols; jr += kNr) {
      float* tile = c + ir * ldc + jr;
      const float* next = jr + kNr < cols ? tile + kNr
                          : ir + kMr < rows ? c + (ir + kMr) * ldc : nullptr;
      micro_kernel(pairs, ap, b_packed + (jr / kNr) * pairs * kNr, tile, ldc, mr,
                   min64(kNr, cols - jr), accumulate, next);
    }
  }
}

void logits_grad_row(const float* src, int64_t cols, bool recompute, float row_max,
                     float inv_sum, float scale, int64_t target, uint16_t* g) {
  const __m512 vmax = _mm512_set1_ps(row_max);
  const __m512 vinv = _mm512_set1_ps(inv_sum);
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512 one = _mm512_set1_ps(1.0f);
  const bool given_times_inv = !recompute && inv_sum != 1.0f;
  for (int64_t j = 0; j < cols; j += 16) {
    const __mmask16 mask = first_lanes(cols - j);
    __m512 p = _mm512_maskz_loadu_ps(mask, src + j);
    if (recompute) {
      p = _mm512_mul_ps(Sleef_expf16_u10(_mm512_sub_ps(p, vmax)), vinv);
    } else if (given_times_inv) {
      p = _mm512_mul_ps(p, vinv);
    }
    if (target >= j && target < j + 16) {
      p = _mm512_mask_sub_ps(p, static_cast<__mmask16>(1u << (target - j)), p, one);
    }
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_mul_ps(p, vscale));
    _mm256_mask_storeu_epi16(g + j, mask, (__m256i)h);
  }
}

void round_to_bf16(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 mask = first_lanes(n - j);
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, src + j));
    _mm256_mask_storeu_epi16(dst + j, mask, (__m256i)h);
  }
}

void rescale_bf16(const uint16_t* src, int64_t n, float scale, uint16_t* dst) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 mask = first_lanes(n - j);
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_mul_ps(load_bf16(src + j, mask), vscale));
    _mm256_mask_storeu_epi16(dst + j, mask, (__m256i)h);
  }
}

float row_max(const float* row, int64_t n) {
  __m512 m = _mm512_set1_ps(-__builtin_inff());
  // vmaxps drops a NaN once a later lane compares against it; torch.amax returns NaN for a
  // row holding one, so NaN lanes are tracked apart (one compare per 16 floats).
  __mmask16 nan = 0;
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 mask = first_lanes(n - j);
    const __m512 v = _mm512_maskz_loadu_ps(mask, row + j);
    m = _mm512_mask_max_ps(m, mask, m, v);
    nan |= _mm512_mask_cmp_ps_mask(mask, v, v, _CMP_UNORD_Q);
  }
  return nan ? __builtin_nanf("") : _mm512_reduce_max_ps(m);
}

double exp_sum(const float* row, int64_t n, float row_max, float* exps) {
  const __m512 vmax = _mm512_set1_ps(row_max);
  double sum = 0.0;
  for (int64_t start = 0; start < n; start += kExpSumBlock) {
    const int64_t stop = min64(n, start + kExpSumBlock);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = start; j < stop; j += 16) {
      const __mmask16 mask = first_lanes(stop - j);
      const __m512 e = Sleef_expf16_u10(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, row + j), vmax));
      acc = _mm512_mask_add_ps(acc, mask, acc, e);
      if (exps != nullptr) {
        _mm512_mask_storeu_ps(exps + j, mask, e);
      }
    }
    sum += _mm512_reduce_add_ps(acc);
  }
  return sum;
}

}  // namespace cpu
}  // namespace ascend_ops
