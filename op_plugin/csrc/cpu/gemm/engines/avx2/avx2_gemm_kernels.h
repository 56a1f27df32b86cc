// The AVX2 + FMA kernels of the own bfloat16 GEMM for CPUs without AVX512
// (avx2_gemm_kernels.cpp; the driver is avx2_gemm.h). bf16 operands are widened to fp32
// while they are packed, which is exact (a bf16 is the top half of an fp32), and the
// products are fp32 FMAs, so no fp32 copy of a whole operand is ever made. Call them only
// when avx2_kernels_supported() is true.
//
// Plain C types only, for the reason avx512_kernels.h gives: the implementation file is
// compiled for a newer instruction set than the rest of the library.
//
// Packed layouts (fp32; rows or columns past the end of the block are zero):
//   A, kAvx2Mr-row panels:  a[p * kAvx2Mr + r] = A(r, k0 + p)
//   B, kAvx2Nr-col panels:  b[p * kAvx2Nr + j] = B(k0 + p, j)
// which is what the 6 x 16 micro-kernel multiplies: one A value broadcast against two
// vectors of 8 B values, into 12 accumulators.
#pragma once

#include "../avx512bf16/avx512_kernels.h"  // Bf16View (plain C declarations only)

#include <stdint.h>

namespace ascend_ops {
namespace cpu {
namespace avx2 {

constexpr int64_t kAvx2Mr = 6;
constexpr int64_t kAvx2Nr = 16;

// Floats of slack a pack_a buffer needs past its last panel (the vector stores of a
// row-major A write two lanes past a panel's last K step, then overwrite them).
constexpr int64_t kPackSlack = 8;

// Packs rows [0, rows) x columns [k0, k0 + kc) of A into ceil(rows / kAvx2Mr) panels of kc
// steps each. Reads only that region.
void pack_a(Bf16View a, int64_t rows, int64_t k0, int64_t kc, float* out);

// Packs rows [k0, k0 + kc) x columns [0, cols) of B into ceil(cols / kAvx2Nr) panels of kc
// steps each. Reads only that region.
void pack_b(Bf16View b, int64_t k0, int64_t kc, int64_t cols, float* out);

// C[rows, cols] (fp32, leading dimension ldc) = (accumulate ? C : 0) + A @ B over kc steps,
// A and B packed by pack_a and pack_b. Each element is summed in K order, then added to C.
void gemm_packed(int64_t rows, int64_t cols, int64_t kc, const float* a_packed,
                 const float* b_packed, float* c, int64_t ldc, bool accumulate);

}  // namespace avx2
}  // namespace cpu
}  // namespace ascend_ops
