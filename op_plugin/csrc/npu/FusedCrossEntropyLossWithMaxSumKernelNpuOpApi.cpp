// NPU kernel of fused_cross_entropy_loss_with_max_sum (SPEC §3, the loss and softmax
// from the global statistics): the shared validation, then CANN's
// aclnnFusedCrossEntropyLossWithMaxSum. BT == 0 returns empty outputs without a call;
// a [BT, 0] vocab_parallel_logits (an empty shard) gives a [BT, 0] softmax, the loss
// computed without it.
#include "aclnn_call.h"
#include "npu_tensors.h"

#include "../validation.h"

#include "torch_npu/csrc/core/npu/NPUGuard.h"

namespace ascend_ops::npu {

std::tuple<at::Tensor, at::Tensor> fused_cross_entropy_loss_with_max_sum(
    const at::Tensor& logits_max, const at::Tensor& sum_exp_logits,
    const at::Tensor& predicted_logits, double label_smoothing,
    const std::optional<at::Tensor>& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& vocab_parallel_logits) {
  check_fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits,
                                              label_smoothing, input, weight,
                                              vocab_parallel_logits);
  const c10_npu::NPUGuard guard(logits_max.device());
  const int64_t bt = logits_max.size(0);
  const at::TensorOptions f32 = logits_max.options();
  at::Tensor loss = at::empty({bt}, f32);  // [BT]
  at::Tensor softmax = vocab_parallel_logits.has_value()
                           ? at::empty(vocab_parallel_logits->sizes(), f32)  // [BT, V]
                           : at::empty({0}, f32);
  if (bt == 0) {
    return {loss, softmax};
  }
  std::optional<at::Tensor> logits_c, softmax_out;
  if (vocab_parallel_logits.has_value() && vocab_parallel_logits->size(1) > 0) {
    logits_c = as_aclnn_input(*vocab_parallel_logits, Strides::kAnyView);
    softmax_out = softmax;
  }
  at::Tensor max_c = as_aclnn_input(logits_max, Strides::kAnyView);
  at::Tensor sum_c = as_aclnn_input(sum_exp_logits, Strides::kAnyView);
  at::Tensor predicted_c = as_aclnn_input(predicted_logits, Strides::kAnyView);
  float smoothing = static_cast<float>(label_smoothing);  // validated: 0
  std::optional<at::Tensor> no_input, no_weight;          // validated: None (as on the NPU)
  run_aclnn<LossWithMaxSumPhase1>(k_fused_cross_entropy_loss_with_max_sum, nullptr, max_c,
                                  sum_c, predicted_c, smoothing, no_input, no_weight, logits_c,
                                  loss, softmax_out);
  return {loss, softmax};
}

}  // namespace ascend_ops::npu
