// The one switch that picks how the CPU kernels compute, read from the environment on
// every call (so a test can change it) and parsed here only:
//
//   ASCEND_OPS_CPU_GEMM = auto (default) | onednn | avx512bf16 | avx2 | portable
//   ASCEND_OPS_CPU_PORTABLE = 1           alias of ASCEND_OPS_CPU_GEMM=portable
//
// "portable" also sends the non-GEMM kernels (batch_norm_reduce_backward's sums) to their
// portable loops; the other values concern the GEMM layer (gemm.h) only.
//
// Two debug switches (0 or 1, default 0) make the operand contract of the GEMM layer
// testable on any CPU (gemm_operands.h); the test suite turns both on:
//
//   ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS = 1  every operand handed to oneDNN / ATen must be
//                                           dense or zero-padded, else RuntimeError
//   ASCEND_OPS_CPU_POISON_SCRATCH = 1       the kernels' scratch buffers start as NaN
#pragma once

#include <optional>

namespace ascend_ops {
namespace cpu {

enum class GemmEngine { kOneDnn, kAvx512Bf16, kAvx2, kPortable };

// "onednn", "avx512bf16", "avx2" or "portable".
const char* engine_name(GemmEngine engine);

// The engine the environment forces, or nullopt for "auto". Throws ValueError naming the
// variable on any other value, or when the two variables disagree.
std::optional<GemmEngine> forced_gemm_engine();

// True when the environment forces the portable path.
bool portable_forced();

// The two debug switches above. Throw ValueError naming the variable on a value other
// than 0 or 1.
bool gemm_operand_check_enabled();
bool scratch_poison_enabled();

}  // namespace cpu
}  // namespace ascend_ops
