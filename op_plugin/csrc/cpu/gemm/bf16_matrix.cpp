#include "bf16_matrix.h"

#include "avx2_kernels.h"
#include "avx512_kernels.h"

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>  // at::internal::GRAIN_SIZE
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ascend_ops {
namespace cpu {
namespace {

// Which build of the row kernels this CPU runs: AVX512-BF16 (avx512_kernels.h), AVX2 + FMA
// (avx2_kernels.h) or the scalar loops below.
enum class Isa { kAvx512, kAvx2, kScalar };

Isa row_kernel_isa() {
  static const Isa isa = avx512_kernels_supported() ? Isa::kAvx512
                         : avx2_kernels_supported() ? Isa::kAvx2
                                                    : Isa::kScalar;
  return isa;
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
  const Isa isa = row_kernel_isa();
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(1, cols));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* s = src + r * ld_src;
      uint16_t* d = dst + r * ld_dst;
      if (isa == Isa::kAvx512) {
        round_to_bf16(s, cols, d);
        continue;
      }
      if (isa == Isa::kAvx2) {
        avx2::round_to_bf16(s, cols, d);
        continue;
      }
      for (int64_t c = 0; c < cols; ++c) {
        d[c] = c10::BFloat16(s[c]).x;  // round to nearest even
      }
    }
  });
}

void write_logits_grad_row(const float* src, int64_t cols, bool recompute, float row_max,
                           float inv_sum, float scale, int64_t target, uint16_t* g) {
  switch (row_kernel_isa()) {
    case Isa::kAvx512:
      logits_grad_row(src, cols, recompute, row_max, inv_sum, scale, target, g);
      return;
    case Isa::kAvx2:
      avx2::logits_grad_row(src, cols, recompute, row_max, inv_sum, scale, target, g);
      return;
    case Isa::kScalar:
      break;
  }
  for (int64_t j = 0; j < cols; ++j) {
    const float p = recompute ? std::exp(src[j] - row_max) * inv_sum : src[j];
    g[j] = c10::BFloat16((p - (j == target ? 1.0f : 0.0f)) * scale).x;
  }
}

float logits_row_max(const float* row, int64_t n) {
  switch (row_kernel_isa()) {
    case Isa::kAvx512:
      return row_max(row, n);
    case Isa::kAvx2:
      return avx2::row_max(row, n);
    case Isa::kScalar:
      break;
  }
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    if (std::isnan(row[j])) return row[j];  // NaN in, NaN out, as torch.amax
    m = std::max(m, row[j]);
  }
  return m;
}

double logits_exp_sum(const float* row, int64_t n, float row_max) {
  switch (row_kernel_isa()) {
    case Isa::kAvx512:
      return exp_sum(row, n, row_max);
    case Isa::kAvx2:
      return avx2::exp_sum(row, n, row_max);
    case Isa::kScalar:
      break;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    sum += std::exp(row[j] - row_max);
  }
  return sum;
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
  const Isa isa = row_kernel_isa();
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(1, cols));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const uint16_t* s = src + r * ld_src;
      uint16_t* d = dst + r * ld_dst;
      if (isa == Isa::kAvx512) {
        rescale_bf16(s, cols, row_scale[r], d);
        continue;
      }
      if (isa == Isa::kAvx2) {
        avx2::rescale_bf16(s, cols, row_scale[r], d);
        continue;
      }
      for (int64_t c = 0; c < cols; ++c) {
        d[c] = c10::BFloat16(static_cast<float>(c10::BFloat16(s[c], c10::BFloat16::from_bits())) *
                             row_scale[r])
                   .x;
      }
    }
  });
}

}  // namespace cpu
}  // namespace ascend_ops
