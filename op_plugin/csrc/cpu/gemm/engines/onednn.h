// The onednn engine (gemm.h): oneDNN's bf16 kernels, reached through ATen. Its fp32-out
// products are ATen's GEMM on fp32 copies of the operands with oneDNN told to compute in
// bf16 (exact: the values are bf16), which runs oneDNN's AMX or AVX512-BF16 kernels; its
// rounded products are oneDNN's bf16-in/bf16-out GEMM on the operands in place. bf16
// operands only.
#pragma once

#include <ATen/core/Tensor.h>

namespace ascend_ops {
namespace cpu {

class GemmOperand;

// Whether this CPU offers the engine: where torch itself sends bf16 matmuls to oneDNN
// (onednn.cpp says which CPUs those are).
bool onednn_bf16_supported();

// gemm() and gemm_rounded() (gemm.h) on this engine.
void onednn_gemm(const GemmOperand& a, const GemmOperand& b, at::Tensor& c, bool accumulate);
void onednn_gemm_rounded(const GemmOperand& a, const GemmOperand& b, at::Tensor& out);

}  // namespace cpu
}  // namespace ascend_ops
