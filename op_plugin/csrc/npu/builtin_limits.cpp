#include "builtin_limits.h"

#include <c10/util/Exception.h>

namespace ascend_ops::npu {
namespace {

constexpr int64_t kMaxHidden = 65535;         // both modes of the FLCE backward
constexpr int64_t kMinVocabHighPerf = 128;    // high-performance mode
constexpr int64_t kMaxVocabHighPerf = 65280;  // high-performance mode
constexpr int64_t kMaxHiddenForward = 65534;  // aclnnFusedLinearOnlineMaxSum

constexpr const char* kWayOut =
    "; use impl='npu_custom' (the ascend_ops op package, see docs/npu.md) or, for a "
    "vocabulary shard this large, split it over more ranks";

}  // namespace

void check_builtin_flce_grad_limits(int64_t bt, int64_t h, int64_t v, bool high_performance) {
  (void)bt;  // its limit is not exact enough to reject on; kFlceGradBuiltinHint names it
  TORCH_CHECK_NOT_IMPLEMENTED(
      h <= kMaxHidden, "fused_linear_cross_entropy_loss_grad: CANN's built-in "
      "aclnnFusedLinearCrossEntropyLossGrad needs H = input.size(1) <= ", kMaxHidden,
      ", got ", h, kWayOut);
  if (high_performance) {
    TORCH_CHECK_NOT_IMPLEMENTED(
        v >= kMinVocabHighPerf && v <= kMaxVocabHighPerf,
        "fused_linear_cross_entropy_loss_grad: CANN's built-in "
        "aclnnFusedLinearCrossEntropyLossGrad in high-performance mode ('softmax' given) "
        "needs ", kMinVocabHighPerf, " <= V = weight.size(0) <= ", kMaxVocabHighPerf,
        ", got ", v, "; memory-saving mode (softmax=None) has no V limit", kWayOut);
  }
}

void check_builtin_online_max_sum_limits(int64_t h, int64_t v) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      h <= kMaxHiddenForward, "fused_linear_online_max_sum: CANN's built-in "
      "aclnnFusedLinearOnlineMaxSum needs H = input.size(1) <= ", kMaxHiddenForward,
      ", got ", h, "; CPU tensors accept any H");
  TORCH_CHECK_NOT_IMPLEMENTED(
      v >= 1, "fused_linear_online_max_sum: CANN's built-in aclnnFusedLinearOnlineMaxSum "
      "needs V = weight.size(0) >= 1, got ", v, "; CPU tensors accept an empty shard");
}

}  // namespace ascend_ops::npu
