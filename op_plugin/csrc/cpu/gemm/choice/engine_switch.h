// The switches that pick how the CPU kernels compute, read from the environment on every
// call (so a test can change them) and parsed here only:
//
//   ASCEND_OPS_CPU_GEMM = auto (default) | onednn | mkl | amx | avx512bf16 | avx2 | portable
//       the engine of both kinds of product (gemm.h: fp32-out and rounded)
//   ASCEND_OPS_CPU_GEMM_FP32_OUT = <same values>   the fp32-out products only
//   ASCEND_OPS_CPU_GEMM_ROUNDED  = <same values>   the rounded (half-out) products only
//   ASCEND_OPS_CPU_PORTABLE = 1           alias of ASCEND_OPS_CPU_GEMM=portable
//
// A per-kind variable, when set (non-empty), decides its kind and overrides the general one
// ("auto" there means: measured, whatever ASCEND_OPS_CPU_GEMM says). "portable" in
// ASCEND_OPS_CPU_GEMM (or the alias) also sends the non-GEMM kernels (the batch-norm sums)
// to their portable loops; the other values concern the GEMM layer only.
// ASCEND_OPS_CPU_BN_LOOPS picks among the batch-norm loops' builds (batch_norm_loops.h).
//
// Two debug switches (0 or 1, default 0) make the operand contract of the GEMM layer
// testable on any CPU (gemm_operands.h); the test suite turns both on:
//
//   ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS = 1  every operand handed to oneDNN / ATen must be
//                                           dense or zero-padded, else RuntimeError
//   ASCEND_OPS_CPU_POISON_SCRATCH = 1       the kernels' scratch buffers start as NaN
#pragma once

#include <optional>
#include <string>

namespace ascend_ops {
namespace cpu {

enum class GemmEngine { kOneDnn, kMkl, kAmx, kAvx512Bf16, kAvx2, kPortable };

// The two kinds of product the kernels ask for (gemm.h): C fp32 (gemm()), and half out for
// a K complete in one product (gemm_rounded()). Each kind has its own engine.
enum class GemmKind { kFp32Out, kRounded };

// "onednn", "mkl", "amx", "avx512bf16", "avx2" or "portable".
const char* engine_name(GemmEngine engine);
// "fp32_out" or "rounded".
const char* kind_name(GemmKind kind);
// The engine named `name`, or nullopt for a name that is not one.
std::optional<GemmEngine> engine_named(const std::string& name);

// What the environment forces for one kind: the engine and the variable that said so.
struct ForcedEngine {
  GemmEngine engine;
  const char* variable;
};
// The engine the environment forces for `kind`, or nullopt for "auto". Throws ValueError
// naming the variable on any other value, or when ASCEND_OPS_CPU_GEMM and
// ASCEND_OPS_CPU_PORTABLE disagree.
std::optional<ForcedEngine> forced_gemm_engine(GemmKind kind);

// True when the environment forces the portable path.
bool portable_forced();

// The two debug switches above. Throw ValueError naming the variable on a value other
// than 0 or 1.
bool gemm_operand_check_enabled();
bool scratch_poison_enabled();

}  // namespace cpu
}  // namespace ascend_ops
