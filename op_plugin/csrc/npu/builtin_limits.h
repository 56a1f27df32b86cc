// Shape limits of CANN's built-in aclnn ops that their phase 1 does not report clearly
// (they surface from the tiling as 561103, an "internal error"), checked before the call
// so the caller learns which argument is out of range. SPEC does not impose them: the
// CPU paths accept every shape, and our custom op package (impl="npu_custom") decides
// for itself. Each throws NotImplementedError (a RuntimeError in Python).
//
// This file is the one home of these numbers: each is DERIVED here from the formula of
// CANN 9.0.0's host code (hicann/ops-nn v9.0.0) with the Unified Buffer size that
// PlatformAscendC reports (asc-devkit v9.0.0), citing the line it comes from. It is plain
// C++ (no torch_npu), compiled into ascend_ops._C as well as the NPU adapter, so the
// docs' tests, the parity script and the NPU tests read the same values
// (ascend_ops.npu_limits) on any machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ascend_ops::npu {

// The limits, as derived in builtin_limits.cpp.
struct BuiltinLimits {
  uint64_t ub_bytes;                     // PlatformAscendC's UB on Atlas A2/A3 (910B, 910_93)
  int64_t flce_grad_max_hidden;          // H, both modes
  int64_t flce_grad_high_perf_min_vocab;  // V, high-performance mode
  int64_t flce_grad_high_perf_max_vocab;  // V, high-performance mode
  int64_t flce_grad_high_perf_max_rows;   // BT, high-performance mode
  int64_t online_max_sum_max_hidden;      // H of aclnnFusedLinearOnlineMaxSum
  int64_t online_max_sum_min_vocab;       // V of aclnnFusedLinearOnlineMaxSum
};

const BuiltinLimits& builtin_limits();

// Why CANN's built-in aclnnFusedLinearCrossEntropyLossGrad refuses [BT, H] x [V, H]
// (high_performance: softmax given), or nullopt when it takes it.
std::optional<std::string> builtin_flce_grad_refusal(int64_t bt, int64_t h, int64_t v,
                                                     bool high_performance);

// Raises NotImplementedError with builtin_flce_grad_refusal's message, if any.
void check_builtin_flce_grad_limits(int64_t bt, int64_t h, int64_t v, bool high_performance);

// aclnnFusedLinearOnlineMaxSum: H = input.size(1) <= 65534 and V = weight.size(0) >= 1.
void check_builtin_online_max_sum_limits(int64_t h, int64_t v);

// Appended when the built-in FLCE backward still refuses a call (161002 or an internal
// error): the limits, and where else the shape runs.
const char* flce_grad_builtin_hint();

}  // namespace ascend_ops::npu
