// A bfloat16 GEMM with fp32 output and fp32 accumulation, on the AVX512-BF16 kernels.
#pragma once

#include "avx512_kernels.h"

#include <cstdint>

namespace ascend_ops {
namespace cpu {

// C[m, n] (fp32, leading dimension ldc) = (accumulate ? C : 0) + A[m, k] @ B[k, n].
// A and B are strided bf16 views, so transposed operands cost nothing extra: they are
// repacked block by block either way. Work is split over row blocks of C whose size
// depends on the shape only, and each C element is summed in one fixed order, so the
// result is bitwise the same for any thread count. Each thread packs K x 256 of B; where
// all threads' tiles would pass 64 MiB, K is taken in several passes (same sums, same
// order). Requires avx512_kernels_supported().
void bf16_gemm(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, float* c, int64_t ldc,
               bool accumulate);

// out[m, n] (bf16, leading dimension ld_out) = bf16(A @ B): the same sums as bf16_gemm,
// each rounded once (to nearest even) when complete. The fp32 sums live only in a
// per-thread row chunk (192 x 256 floats), so no fp32 [m, n] matrix is ever held (a K
// that takes several passes: a 16 MiB block of rows at a time).
void bf16_gemm_rounded(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, uint16_t* out,
                       int64_t ld_out);

}  // namespace cpu
}  // namespace ascend_ops
