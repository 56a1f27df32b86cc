// Shape limits of CANN's built-in aclnn ops that their phase 1 does not report clearly
// (they surface from the tiling as 561103, an "internal error"), checked before the call
// so the caller learns which argument is out of range. SPEC does not impose them: the
// CPU paths accept every shape, and our custom op package (impl="npu_custom") decides
// for itself. Each throws NotImplementedError (a RuntimeError in Python).
#pragma once

#include <cstdint>

namespace ascend_ops::npu {

// aclnnFusedLinearCrossEntropyLossGrad: H = input.size(1) <= 65535 in both modes;
// high-performance mode (softmax given) also needs 128 <= V = weight.size(0) <= 65280.
void check_builtin_flce_grad_limits(int64_t bt, int64_t h, int64_t v, bool high_performance);

// aclnnFusedLinearOnlineMaxSum: H = input.size(1) <= 65534 and V = weight.size(0) >= 1.
void check_builtin_online_max_sum_limits(int64_t h, int64_t v);

// Appended when the built-in FLCE backward still refuses a call (161002 or an internal
// error): the limits we know of but cannot check exactly (BT).
inline constexpr const char* kFlceGradBuiltinHint =
    "CANN's built-in aclnnFusedLinearCrossEntropyLossGrad is known to refuse H > 65535, "
    "and in high-performance mode V < 128, V > 65280 or BT above about 65536 rows; "
    "impl='npu_custom' (our op package) or CPU tensors accept any shape";

}  // namespace ascend_ops::npu
