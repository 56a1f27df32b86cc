// The mkl engine (gemm.h): MKL's bf16 GEMM with fp32 accumulation and fp32 output,
// cblas_gemm_bf16bf16f32, as libtorch_cpu exports it. It is looked up at run time (not
// linked), so a torch built without MKL, or one whose MKL lacks it, simply has no mkl
// engine. On an Intel Xeon with AMX it ran x @ W.T at 1.06-1.35 TFLOP/s against 0.28-0.31
// for ATen's fp32 GEMM on fp32 copies (docs/cpu_kernels.md), with no fp32 copy at all.
#pragma once

#include <ATen/core/Tensor.h>

namespace ascend_ops {
namespace cpu {

class GemmOperand;

// Whether cblas_gemm_bf16bf16f32 is exported by a library of this process.
bool mkl_bf16_gemm_available();

// C = [C +] A @ B, A [m, k] and B [k, n] bf16 views (row- or column-major, any leading
// dimension: MKL is told the layout and reads only the logical elements), C an fp32 [m, n]
// view with contiguous rows. Call only when mkl_bf16_gemm_available().
void mkl_bf16_gemm(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, bool accumulate);

// Hands MKL's cached buffers back (mkl_free_buffers), where libtorch_cpu exports it. Its
// first bf16 GEMM keeps them: measured on AMD EPYC (AVX2), the first-use measurement's
// 512 x 512 x 4096 product left 32 MiB resident (57 MiB at its peak), which a CPU where
// another engine wins never uses again. Call only while no MKL call runs.
void mkl_release_buffers();

// gemm() and gemm_rounded() (gemm.h) on this engine. MKL reads the bf16 operands in place,
// within the operand contract (gemm_operands.h): a padded view whose padding is not zero is
// multiplied from a dense copy. The rounded product is fp32 sums of row blocks of at most
// 16 MiB, each rounded once (to nearest even) into out.
void mkl_gemm(const GemmOperand& a, const GemmOperand& b, at::Tensor& c, bool accumulate);
void mkl_gemm_rounded(const GemmOperand& a, const GemmOperand& b, at::Tensor& out);

}  // namespace cpu
}  // namespace ascend_ops
