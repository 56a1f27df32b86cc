// NPU kernel of fused_linear_cross_entropy_loss_grad (SPEC §1): the shared validation,
// then aclnnFusedLinearCrossEntropyLossGrad (impl="npu", CANN's built-in) or
// aclnnAscendOpsFusedLinearCrossEntropyLossGrad (impl="npu_custom", our op package),
// through one code path, filling the gaps the op leaves. Nothing here waits for the
// device:
//   - masked_target outside [0, V) on an unmasked row: checked on the device
//     (npu_tensors.h, target_check_mode) instead of by a host copy, and folded into the
//     mask on the device (fold_target_range) so that no kernel writes outside its row;
//   - a bool target_mask [BT]: passed as it is to CANN's built-in, which takes DT_BOOL;
//     packed to uint8 on the device for our package;
//   - BT == 0 (or H == 0, V == 0): the op leaves its outputs unwritten, we zero them;
//   - internal formats (an NZ weight) cast to ND; strided views passed as they are to
//     CANN's built-in (it makes them contiguous itself), made contiguous for our package.
#include "aclnn_call.h"
#include "builtin_limits.h"
#include "npu_tensors.h"

#include "../validation.h"

#include "torch_npu/csrc/core/npu/NPUGuard.h"

namespace ascend_ops::npu {
namespace {

std::optional<at::Tensor> as_aclnn_optional(const std::optional<at::Tensor>& t,
                                            Strides strides) {
  return t.has_value() ? std::optional<at::Tensor>(as_aclnn_input(*t, strides)) : std::nullopt;
}

std::tuple<at::Tensor, at::Tensor> run_flce_grad(
    const AclnnOp& op, const at::Tensor& grad, const at::Tensor& input,
    const at::Tensor& weight, const at::Tensor& target_mask, const at::Tensor& masked_target,
    double label_smoothing, const std::optional<at::Tensor>& logits_max,
    const std::optional<at::Tensor>& sum_exp_logits, const std::optional<at::Tensor>& softmax,
    std::optional<int64_t> scratch_bytes) {
  // check_values=false: the target range is checked below, on the device.
  check_fused_linear_cross_entropy_loss_grad(grad, input, weight, target_mask, masked_target,
                                             label_smoothing, logits_max, sum_exp_logits,
                                             softmax, /*check_values=*/false);
  // The CPU kernel's scratch budget means nothing to aclnn; it is still checked so that
  // a bad value is rejected alike everywhere.
  check_scratch_bytes("fused_linear_cross_entropy_loss_grad", scratch_bytes);
  const c10_npu::NPUGuard guard(input.device());
  at::Tensor input_grad = at::empty(input.sizes(), input.options());     // [BT, H]
  at::Tensor weight_grad = at::empty(weight.sizes(), weight.options());  // [V, H]
  if (input.numel() == 0 || weight.numel() == 0) {
    input_grad.zero_();
    weight_grad.zero_();
    return {input_grad, weight_grad};
  }
  if (!op.custom) {  // our package decides its limits for itself
    check_builtin_flce_grad_limits(input.size(0), input.size(1), weight.size(0),
                                   softmax.has_value());
  }

  const Strides strides = op.custom ? Strides::kContiguousOnly : Strides::kAnyView;
  // CANN's built-in takes a DT_BOOL [BT] mask as it is (its aclnn_*.cpp admits DT_BOOL and
  // DT_UINT8); our package takes the packed uint8 form only.
  at::Tensor mask = target_mask.scalar_type() == at::kBool && op.custom
                        ? pack_bool_mask(target_mask)
                        : as_aclnn_input(target_mask, strides);
  at::Tensor target = as_aclnn_input(masked_target, strides);
  check_targets(mask, target, weight.size(0));
  // CANN's memory-saving kernel bounds each target to its block itself
  // (fused_linear_cross_entropy_loss_grad_mem_friendly.h:695); its high-performance kernel
  // and our package are given in-range targets only.
  if (softmax.has_value() || op.custom) {
    MaskedTargets folded = fold_target_range(mask, target, weight.size(0));
    mask = folded.mask;
    target = folded.target;
  }
  at::Tensor grad_c = as_aclnn_input(grad, strides);
  at::Tensor input_c = as_aclnn_input(input, strides);
  at::Tensor weight_c = as_aclnn_input(weight, strides);
  // The op reads logits_max / sum_exp_logits only when softmax is absent: pass exactly
  // one mode's inputs so its choice of mode is the one SPEC makes by `softmax is None`.
  std::optional<at::Tensor> max_c, sum_c, softmax_c;
  if (softmax.has_value()) {
    // High-performance mode: the op may overwrite softmax (declared `Tensor(a!)?`). A
    // non-contiguous softmax is copied (by the op or here), so the caller's tensor is
    // then left intact.
    softmax_c = as_aclnn_input(*softmax, strides);
  } else {
    max_c = as_aclnn_optional(logits_max, strides);
    sum_c = as_aclnn_optional(sum_exp_logits, strides);
  }
  if (op.custom) {  // the generated API: the attribute (a double) after the inputs
    run_aclnn<FlceGradCustomPhase1>(op, nullptr, grad_c, input_c, weight_c, mask, target,
                                    max_c, sum_c, softmax_c, label_smoothing, input_grad,
                                    weight_grad);
  } else {
    float smoothing = static_cast<float>(label_smoothing);  // the built-in takes a float
    run_aclnn<FlceGradPhase1>(op, flce_grad_builtin_hint(), grad_c, input_c, weight_c, mask,
                              target, smoothing, max_c, sum_c, softmax_c, input_grad,
                              weight_grad);
  }
  return {input_grad, weight_grad};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> fused_linear_cross_entropy_loss_grad(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    const at::Tensor& target_mask, const at::Tensor& masked_target, double label_smoothing,
    const std::optional<at::Tensor>& logits_max, const std::optional<at::Tensor>& sum_exp_logits,
    const std::optional<at::Tensor>& softmax, std::optional<int64_t> scratch_bytes) {
  return run_flce_grad(k_fused_linear_cross_entropy_loss_grad, grad, input, weight,
                       target_mask, masked_target, label_smoothing, logits_max,
                       sum_exp_logits, softmax, scratch_bytes);
}

std::tuple<at::Tensor, at::Tensor> fused_linear_cross_entropy_loss_grad_custom(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    const at::Tensor& target_mask, const at::Tensor& masked_target, double label_smoothing,
    const std::optional<at::Tensor>& logits_max, const std::optional<at::Tensor>& sum_exp_logits,
    const std::optional<at::Tensor>& softmax, std::optional<int64_t> scratch_bytes) {
  return run_flce_grad(k_fused_linear_cross_entropy_loss_grad_custom, grad, input, weight,
                       target_mask, masked_target, label_smoothing, logits_max,
                       sum_exp_logits, softmax, scratch_bytes);
}

}  // namespace ascend_ops::npu
