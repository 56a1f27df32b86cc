#include "bf16_matrix.h"

#include "../isa_builds.h"
#if ASCEND_OPS_X86_KERNELS
#include "engines/avx2/avx2_kernels.h"
#include "engines/avx512bf16/avx512_kernels.h"
#endif

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>  // at::internal::GRAIN_SIZE
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ascend_ops {
namespace cpu {
namespace {

// The scalar row kernels: the contracts of avx512_kernels.h with the same rounding (to
// nearest even), for any CPU. In a build without the x86 kernels (aarch64) they are the
// only ones, and GCC vectorises the loops it can for NEON itself (docs/cpu_kernels.md).
void scalar_round_to_bf16(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t c = 0; c < n; ++c) {
    dst[c] = c10::BFloat16(src[c]).x;  // round to nearest even
  }
}

void scalar_logits_grad_row(const float* src, int64_t cols, bool recompute, float row_max,
                            float inv_sum, float scale, int64_t target, uint16_t* g) {
  const bool given_times_inv = !recompute && inv_sum != 1.0f;
  for (int64_t j = 0; j < cols; ++j) {
    const float p = recompute ? std::exp(src[j] - row_max) * inv_sum
                    : given_times_inv ? src[j] * inv_sum
                                      : src[j];
    g[j] = c10::BFloat16((p - (j == target ? 1.0f : 0.0f)) * scale).x;
  }
}

float scalar_row_max(const float* row, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    if (std::isnan(row[j])) return row[j];  // NaN in, NaN out, as torch.amax
    m = std::max(m, row[j]);
  }
  return m;
}

double scalar_exp_sum(const float* row, int64_t n, float row_max, float* exps) {
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const float e = std::exp(row[j] - row_max);
    sum += e;
    if (exps != nullptr) {
      exps[j] = e;
    }
  }
  return sum;
}

void scalar_rescale_bf16(const uint16_t* src, int64_t n, float scale, uint16_t* dst) {
  for (int64_t c = 0; c < n; ++c) {
    dst[c] = c10::BFloat16(static_cast<float>(c10::BFloat16(src[c], c10::BFloat16::from_bits())) *
                           scale)
                 .x;
  }
}

// One build of the row kernels.
struct RowKernels {
  void (*round)(const float* src, int64_t n, uint16_t* dst);
  void (*logits_grad)(const float* src, int64_t cols, bool recompute, float row_max,
                      float inv_sum, float scale, int64_t target, uint16_t* g);
  float (*max)(const float* row, int64_t n);
  double (*sum_exp)(const float* row, int64_t n, float row_max, float* exps);
  void (*rescale)(const uint16_t* src, int64_t n, float scale, uint16_t* dst);
};

// The build this CPU runs: AVX512-BF16 (avx512_kernels.h), AVX2 + FMA (avx2_kernels.h), or
// the scalar loops above.
const RowKernels& row_kernels() {
  static const RowKernels scalar{scalar_round_to_bf16, scalar_logits_grad_row, scalar_row_max,
                                 scalar_exp_sum, scalar_rescale_bf16};
#if ASCEND_OPS_X86_KERNELS
  static const RowKernels avx512{round_to_bf16, logits_grad_row, row_max, exp_sum, rescale_bf16};
  static const RowKernels avx2{avx2::round_to_bf16, avx2::logits_grad_row, avx2::row_max,
                               avx2::exp_sum, avx2::rescale_bf16};
  static const RowKernels& chosen = avx512_kernels_supported() ? avx512
                                    : avx2_kernels_supported() ? avx2
                                                               : scalar;
  return chosen;
#else
  return scalar;
#endif
}

}  // namespace

uint16_t* bf16_bits(at::Tensor& t) {
  return reinterpret_cast<uint16_t*>(t.mutable_data_ptr<at::BFloat16>());
}

const uint16_t* bf16_bits(const at::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.const_data_ptr<at::BFloat16>());
}

void round_rows(const float* src, int64_t rows, int64_t cols, int64_t ld_src, uint16_t* dst,
                int64_t ld_dst) {
  const auto round = row_kernels().round;
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(1, cols));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      round(src + r * ld_src, cols, dst + r * ld_dst);
    }
  });
}

void write_logits_grad_row(const float* src, int64_t cols, bool recompute, float row_max,
                           float inv_sum, float scale, int64_t target, uint16_t* g) {
  row_kernels().logits_grad(src, cols, recompute, row_max, inv_sum, scale, target, g);
}

float logits_row_max(const float* row, int64_t n) { return row_kernels().max(row, n); }

double logits_exp_sum(const float* row, int64_t n, float row_max) {
  return row_kernels().sum_exp(row, n, row_max, nullptr);
}

double logits_exp_sum_in_place(float* row, int64_t n, float row_max) {
  return row_kernels().sum_exp(row, n, row_max, row);
}

int64_t scratch_ld(int64_t n) {
  int64_t ld = (n + 31) / 32 * 32;
  if ((ld * static_cast<int64_t>(sizeof(uint16_t))) % 2048 == 0) {
    ld += 32;
  }
  return ld;
}

void transpose_bf16(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld_src,
                    uint16_t* dst, int64_t ld_dst) {
  constexpr int64_t kTile = 64;
  const int64_t col_tiles = (cols + kTile - 1) / kTile;
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / (kTile * std::max<int64_t>(rows, 1)));
  at::parallel_for(0, col_tiles, grain, [&](int64_t begin, int64_t end) {
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t c0 = tile * kTile;
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
        const int64_t r1 = std::min(rows, r0 + kTile);
        for (int64_t c = c0; c < c1; ++c) {
          for (int64_t r = r0; r < r1; ++r) {
            dst[c * ld_dst + r] = src[r * ld_src + c];
          }
        }
      }
    }
  });
}

void rescale_rows_bf16(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld_src,
                       const float* row_scale, uint16_t* dst, int64_t ld_dst) {
  const auto rescale = row_kernels().rescale;
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(1, cols));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      rescale(src + r * ld_src, cols, row_scale[r], dst + r * ld_dst);
    }
  });
}

}  // namespace cpu
}  // namespace ascend_ops
