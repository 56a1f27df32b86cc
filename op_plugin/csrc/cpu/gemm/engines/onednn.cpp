#include "onednn.h"

#include "../gemm.h"
#include "../operands/gemm_operands.h"
#include "matmul_precision.h"
#include "portable.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mm.h>

namespace ascend_ops {
namespace cpu {

// The onednn engine is offered where torch itself sends bf16 matmuls to oneDNN: torch's
// mkldnn::_is_mkldnn_bf16_supported, the device check of its own bf16 matmul dispatch
// (x86: AVX512 BW/VL/DQ, on which AVX512-BF16 and AMX make oneDNN faster; aarch64: the
// BF16 extension, where oneDNN runs Arm's Compute Library). Elsewhere oneDNN would not run
// the product at all (ATen's own bf16 loops would, or an fp32 GEMM, as portable), so the
// engine is not offered: a Kunpeng 920 (Armv8.2, no BF16) has portable only. Asking torch
// rather than the CPU's flags keeps the two decisions one.
bool onednn_bf16_supported() {
  static const bool supported = [] {
    if (!at::hasMKLDNN()) {
      return false;
    }
    const auto op =
        c10::Dispatcher::singleton().findSchema({"mkldnn::_is_mkldnn_bf16_supported", ""});
    return op.has_value() && op->typed<bool()>().call();
  }();
  return supported;
}

void onednn_gemm(const GemmOperand& a, const GemmOperand& b, at::Tensor& c, bool accumulate) {
  // bf16 products through oneDNN's bf16 kernels.
  const MatmulPrecisionGuard precision(at::Float32Precision::BF16);
  fp32_copies_gemm(a, b, c, accumulate, GemmEngine::kOneDnn);
}

void onednn_gemm_rounded(const GemmOperand& a, const GemmOperand& b, at::Tensor& out) {
  // oneDNN reads the operands in place, padding included (gemm_operands.h): a padded
  // view whose padding is not zero is multiplied from a dense copy instead.
  const at::Tensor a_half = engine_ready(a.half());
  const at::Tensor b_half = engine_ready(b.half());
  check_handed_operand(a_half, "A", GemmEngine::kOneDnn);
  check_handed_operand(b_half, "B", GemmEngine::kOneDnn);
  at::mm_out(out, a_half, b_half);  // bf16 in, fp32 accumulation, bf16 out
}

}  // namespace cpu
}  // namespace ascend_ops
