// Helpers on bf16 rows and matrices shared by the CPU kernels that feed the GEMM layer.
// Each runs the AVX512 kernel where the CPU has AVX512-BF16 (avx512_kernels.h), else its
// AVX2 twin where the CPU has AVX2 and FMA (avx2_kernels.h), else a scalar loop with the
// same rounding (to nearest even).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ascend_ops {
namespace cpu {

// Leading dimension (>= n) of a bf16 scratch matrix that GEMMs read as row-major A: a
// row stride that is a multiple of 2 KiB puts the 12 rows of a GEMM panel into the same
// L1 sets, where they evict each other (measured ~10 % slower at a stride of 8 KiB).
int64_t scratch_ld(int64_t n);

// The raw bits of a bfloat16 tensor's elements.
uint16_t* bf16_bits(at::Tensor& t);
const uint16_t* bf16_bits(const at::Tensor& t);

// dst[rows, cols] = bf16(src[rows, cols]) (leading dimensions ld_src, ld_dst), in parallel
// over rows.
void round_rows(const float* src, int64_t rows, int64_t cols, int64_t ld_src, uint16_t* dst,
                int64_t ld_dst);

// One row of the logits gradient (avx512_kernels.h, logits_grad_row):
//   g[j] = bf16((p[j] - (j == target)) * scale)
// with p[j] = exp(src[j] - row_max) * inv_sum when `recompute`, else p[j] = src[j] * inv_sum
// (the softmax with inv_sum 1, or the exps logits_exp_sum_in_place left with 1 / their sum).
void write_logits_grad_row(const float* src, int64_t cols, bool recompute, float row_max,
                           float inv_sum, float scale, int64_t target, uint16_t* g);

// The row statistics of a row of n fp32 logits (avx512_kernels.h, row_max and exp_sum): its
// maximum, and the sum of exp(row[j] - row_max). The vector builds add exp in fp32 blocks
// of kExpSumBlock elements into a double, the scalar loop every element into a double.
float logits_row_max(const float* row, int64_t n);
double logits_exp_sum(const float* row, int64_t n, float row_max);
// logits_exp_sum, leaving exp(row[j] - row_max) in row[j]: then write_logits_grad_row on
// the row with inv_sum = 1 / sum and no recompute gives the bits recomputing would.
double logits_exp_sum_in_place(float* row, int64_t n, float row_max);

// dst[cols, rows] = src[rows, cols] (leading dimensions ld_src, ld_dst), in 64 x 64
// tiles so both sides are read and written a cache line at a time.
void transpose_bf16(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld_src,
                    uint16_t* dst, int64_t ld_dst);

// dst[rows, cols] = bf16(src[rows, cols] * row_scale[row]), rounded to nearest even.
void rescale_rows_bf16(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld_src,
                       const float* row_scale, uint16_t* dst, int64_t ld_dst);

}  // namespace cpu
}  // namespace ascend_ops
