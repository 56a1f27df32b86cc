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
#include <cmath>

#include "aclnn_call.h"
#include "builtin_limits.h"
#include "flce_options_custom.h"
#include "npu_tensors.h"

#include "../validation.h"

#include "torch_npu/csrc/core/npu/NPUGuard.h"

namespace ascend_ops::npu {
namespace {

std::optional<at::Tensor> as_aclnn_optional(const std::optional<at::Tensor>& t,
                                            Strides strides) {
  return t.has_value() ? std::optional<at::Tensor>(as_aclnn_input(*t, strides)) : std::nullopt;
}

// The op's two outputs, allocated like input and weight (on the device of the caller's
// NPUGuard, which must outlive the aclnn call). With no elements (BT, H or V == 0) the op
// would leave them unwritten: they are zeroed here and `empty` tells the caller to return
// them without a call.
struct FlceGrads {
  at::Tensor input_grad;   // [BT, H]
  at::Tensor weight_grad;  // [V, H]
  bool empty;
};

FlceGrads new_flce_grads(const at::Tensor& input, const at::Tensor& weight) {
  FlceGrads grads{at::empty(input.sizes(), input.options()),
                  at::empty(weight.sizes(), weight.options()),
                  input.numel() == 0 || weight.numel() == 0};
  if (grads.empty) {
    grads.input_grad.zero_();
    grads.weight_grad.zero_();
  }
  return grads;
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
  FlceGrads grads = new_flce_grads(input, weight);
  if (grads.empty) {
    return {grads.input_grad, grads.weight_grad};
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
  if (op.custom) {  // the generated API: the attributes (doubles) after the inputs
    std::optional<at::Tensor> no_option;  // SPEC §1's op: none of the loss options
    double logit_scale = 1.0, softcap = 0.0;
    run_aclnn<FlceGradCustomPhase1>(op, nullptr, grad_c, input_c, weight_c, mask, target,
                                    max_c, sum_c, softmax_c, no_option, no_option, no_option,
                                    no_option, no_option, label_smoothing, logit_scale, softcap,
                                    grads.input_grad, grads.weight_grad);
  } else {
    float smoothing = static_cast<float>(label_smoothing);  // the built-in takes a float
    run_aclnn<FlceGradPhase1>(op, flce_grad_builtin_hint(), grad_c, input_c, weight_c, mask,
                              target, smoothing, max_c, sum_c, softmax_c, grads.input_grad,
                              grads.weight_grad);
  }
  return {grads.input_grad, grads.weight_grad};
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

// The npu_custom backward of linear_cross_entropy with loss options (SPEC §7;
// python/ascend_ops/npu/options_support.py, ADAPTER_ENTRY): our op package in
// memory-saving mode with the per-row coefficients alpha, beta, gamma [BT] (fp32, for
// grad), this shard's bias and class_weight [V] (fp32, or None) and the attributes
// logit_scale and softcap (0: none). target_mask is SPEC §1's (bool or packed uint8),
// logits_max and sum_exp_logits the forward's global row statistics. Returns
// (input_grad, weight_grad); the bias gradient is the caller's (options_support).
std::tuple<at::Tensor, at::Tensor> fused_linear_cross_entropy_loss_grad_options_custom(
    const at::Tensor& input, const at::Tensor& weight, const at::Tensor& target_mask,
    const at::Tensor& masked_target, const at::Tensor& logits_max,
    const at::Tensor& sum_exp_logits, const at::Tensor& alpha, const at::Tensor& beta,
    const at::Tensor& gamma, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& class_weight, double logit_scale, double softcap) {
  const AclnnOp& op = k_fused_linear_cross_entropy_loss_grad_custom;
  // SPEC §1's checks with alpha in grad's place (fp32 [BT], like beta and gamma).
  check_fused_linear_cross_entropy_loss_grad(alpha, input, weight, target_mask, masked_target,
                                             0.0, logits_max, sum_exp_logits, std::nullopt,
                                             /*check_values=*/false);
  const int64_t bt = input.size(0), vocab = weight.size(0);
  const auto check_vector = [&input](const at::Tensor& t, int64_t n, const char* name) {
    TORCH_CHECK(t.scalar_type() == at::kFloat && t.dim() == 1 && t.size(0) == n,
                "fused_linear_cross_entropy_loss_grad_options_custom: ", name,
                " must be float32 of shape [", n, "], got ", t.scalar_type(), " of shape ",
                t.sizes());
    TORCH_CHECK(t.device() == input.device(),
                "fused_linear_cross_entropy_loss_grad_options_custom: ", name,
                " must be on input's device ", input.device(), ", got ", t.device());
  };
  check_vector(beta, bt, "beta");
  check_vector(gamma, bt, "gamma");
  if (bias.has_value()) check_vector(*bias, vocab, "bias");
  if (class_weight.has_value()) check_vector(*class_weight, vocab, "class_weight");
  TORCH_CHECK(std::isfinite(logit_scale),
              "fused_linear_cross_entropy_loss_grad_options_custom: logit_scale must be finite, got ",
              logit_scale);
  TORCH_CHECK(softcap == 0.0 || (std::isfinite(softcap) && softcap > 0.0),
              "fused_linear_cross_entropy_loss_grad_options_custom: softcap must be 0 (none) or a "
              "finite cap > 0, got ", softcap);
  const c10_npu::NPUGuard guard(input.device());
  FlceGrads grads = new_flce_grads(input, weight);
  if (grads.empty) {
    return {grads.input_grad, grads.weight_grad};
  }
  const Strides strides = Strides::kContiguousOnly;
  at::Tensor mask = target_mask.scalar_type() == at::kBool ? pack_bool_mask(target_mask)
                                                           : as_aclnn_input(target_mask, strides);
  at::Tensor target = as_aclnn_input(masked_target, strides);
  check_targets(mask, target, vocab);
  MaskedTargets folded = fold_target_range(mask, target, vocab);
  mask = folded.mask;
  target = folded.target;
  at::Tensor alpha_c = as_aclnn_input(alpha, strides);
  at::Tensor input_c = as_aclnn_input(input, strides);
  at::Tensor weight_c = as_aclnn_input(weight, strides);
  std::optional<at::Tensor> max_c = as_aclnn_input(logits_max, strides);
  std::optional<at::Tensor> sum_c = as_aclnn_input(sum_exp_logits, strides);
  std::optional<at::Tensor> softmax_c;  // memory-saving mode: the logits are recomputed
  std::optional<at::Tensor> bias_c = as_aclnn_optional(bias, strides);
  std::optional<at::Tensor> weight_class_c = as_aclnn_optional(class_weight, strides);
  std::optional<at::Tensor> alpha_o = alpha_c;
  std::optional<at::Tensor> beta_c = as_aclnn_input(beta, strides);
  std::optional<at::Tensor> gamma_c = as_aclnn_input(gamma, strides);
  double label_smoothing = 0.0;  // smoothing comes in through gamma
  // The kernel reads alpha for grad; grad itself is required by the op's signature.
  run_aclnn<FlceGradCustomPhase1>(op, nullptr, alpha_c, input_c, weight_c, mask, target, max_c,
                                  sum_c, softmax_c, bias_c, weight_class_c, alpha_o, beta_c,
                                  gamma_c, label_smoothing, logit_scale, softcap,
                                  grads.input_grad, grads.weight_grad);
  return {grads.input_grad, grads.weight_grad};
}

}  // namespace ascend_ops::npu
