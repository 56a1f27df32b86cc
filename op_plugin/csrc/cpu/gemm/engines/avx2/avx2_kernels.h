// AVX2 + FMA twins of the row kernels of avx512_kernels.h (avx2_kernels.cpp), for CPUs
// without AVX512 (e.g. AMD EPYC of the Zen 3 class): the logits-gradient row, the row
// statistics and the bf16 rounding passes that feed the portable GEMM engine. Same
// contracts and rounding (to nearest even) as their AVX512 namesakes; call them only when
// avx2_kernels_supported() is true.
//
// Plain C types only, for the reason avx512_kernels.h gives: the implementation file is
// compiled for a newer instruction set than the rest of the library.
#pragma once

#include <stdint.h>

namespace ascend_ops {
namespace cpu {

// True when this CPU runs AVX2 and FMA (cpu_features.cpp; false in a build without the x86
// kernels, cpu/isa_builds.h).
bool avx2_kernels_supported();

// True when this CPU runs F16C (the AVX2 batch-norm loops' float16 conversions).
bool f16c_supported();

namespace avx2 {

void logits_grad_row(const float* src, int64_t cols, bool recompute, float row_max,
                     float inv_sum, float scale, int64_t target, uint16_t* g);
void round_to_bf16(const float* src, int64_t n, uint16_t* dst);
void rescale_bf16(const uint16_t* src, int64_t n, float scale, uint16_t* dst);
float row_max(const float* row, int64_t n);
// Sums exp(row[j] - row_max) in fp32 vectors over blocks of kExpSumBlock elements
// (avx512_kernels.h), each block's sum added to a double in order; stores each exp in
// `exps` where given (which may be row).
double exp_sum(const float* row, int64_t n, float row_max, float* exps = nullptr);

}  // namespace avx2
}  // namespace cpu
}  // namespace ascend_ops
