// The own bfloat16 GEMM for CPUs with AVX2 and FMA but no AVX512-BF16 (the `avx2` engine
// of gemm.h): fp32 output and fp32 accumulation, the bf16 operands read in place and
// widened to fp32 block by block as they are packed (avx2_gemm_kernels.h), so neither
// operand is ever copied whole.
#pragma once

#include "../avx512bf16/avx512_kernels.h"  // Bf16View

#include <cstdint>

namespace ascend_ops {
namespace cpu {

// C[m, n] (fp32, leading dimension ldc) = (accumulate ? C : 0) + A[m, k] @ B[k, n], for
// strided bf16 views A and B (a transposed operand costs nothing extra: every block is
// packed either way). K is taken in blocks of a fixed depth, each block's products summed
// in K order and added to C in turn: every element is summed in one order fixed by k, so
// the result is bitwise the same for any thread count. Reads only the logical regions of
// A and B. Requires avx2_kernels_supported().
void avx2_bf16_gemm(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, float* c,
                    int64_t ldc, bool accumulate);

// out[m, n] (bf16, leading dimension ld_out) = bf16(A @ B): the sums of avx2_bf16_gemm,
// each rounded once (to nearest even), computed a block of rows at a time into 16 MiB of
// fp32 scratch.
void avx2_bf16_gemm_rounded(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k,
                            uint16_t* out, int64_t ld_out);

}  // namespace cpu
}  // namespace ascend_ops
