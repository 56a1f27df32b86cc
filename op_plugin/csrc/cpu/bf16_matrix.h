// Helpers on bf16 scratch matrices shared by the CPU kernels that feed the GEMM layer.
#pragma once

#include <cstdint>

namespace ascend_ops {
namespace cpu {

// Leading dimension (>= n) of a bf16 scratch matrix that GEMMs read as row-major A: a
// row stride that is a multiple of 2 KiB puts the 12 rows of a GEMM panel into the same
// L1 sets, where they evict each other (measured ~10 % slower at a stride of 8 KiB).
int64_t scratch_ld(int64_t n);

// dst[cols, rows] = src[rows, cols] (leading dimensions ld_src, ld_dst), in 64 x 64
// tiles so both sides are read and written a cache line at a time.
void transpose_bf16(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld_src,
                    uint16_t* dst, int64_t ld_dst);

// dst[rows, cols] = bf16(src[rows, cols] * row_scale[row]), rounded to nearest even.
void rescale_rows_bf16(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld_src,
                       const float* row_scale, uint16_t* dst, int64_t ld_dst);

}  // namespace cpu
}  // namespace ascend_ops
