// The portable engine (gemm.h): ATen's fp32 GEMM (IEEE) on fp32 copies of the half
// operands; any CPU, bf16 and float16.
#pragma once

#include "../choice/engine_switch.h"

#include <ATen/core/Tensor.h>

namespace ascend_ops {
namespace cpu {

class GemmOperand;

// gemm() and gemm_rounded() (gemm.h) on this engine. The rounded product holds at most
// 48 MiB of scratch: fp32 products of row and K blocks of the operands, rounded per row block.
void portable_gemm(const GemmOperand& a, const GemmOperand& b, at::Tensor& c, bool accumulate);
void portable_gemm_rounded(const GemmOperand& a, const GemmOperand& b, at::Tensor& out);

// C = [C +] A @ B as ATen's GEMM on the operands' fp32 copies (dense: no padding to read),
// at whatever fp32 matmul precision the caller set: the portable engine's fp32-out product,
// and the onednn engine's (onednn.h). `engine` names the caller in the operand check.
void fp32_copies_gemm(const GemmOperand& a, const GemmOperand& b, at::Tensor& c, bool accumulate,
                      GemmEngine engine);

}  // namespace cpu
}  // namespace ascend_ops
