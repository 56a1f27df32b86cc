// NPU kernel of fused_linear_cross_entropy_loss_grad (SPEC §1): the shared validation,
// then aclnnFusedLinearCrossEntropyLossGrad (CANN's built-in, or our custom op package
// when installed), filling the gaps the built-in leaves:
//   - masked_target outside [0, V) on an unmasked row: rejected by the validation, which
//     reads masked_target and target_mask on the host (one device-to-host copy);
//   - a bool target_mask [BT]: packed to the op's uint8 form, LSB first, padding bits 1;
//   - BT == 0 (or H == 0, V == 0): the op leaves its outputs unwritten, we zero them;
//   - non-contiguous inputs: passed as contiguous copies.
#include "aclnn_call.h"

#include "../validation.h"

#include "torch_npu/csrc/core/npu/NPUGuard.h"

namespace ascend_ops::npu {
namespace {

// Shown when phase 1 refuses the arguments: the built-in's shape limits (SPEC §1 names
// V < 128 for high-performance mode; CANN's API reference states it for both modes).
constexpr const char* kBuiltinLimits =
    "CANN's built-in rejects V = weight.size(0) < 128 and, in memory-saving mode, "
    "H = input.size(1) > 65535; impl='cpu' accepts both";

// Bool mask [BT] (True = masked) -> bit-packed uint8 [ceil(BT/8)] on `device`. Packed
// on the host: the validation has just copied the mask there anyway.
at::Tensor pack_bool_mask(const at::Tensor& mask, const at::Device& device) {
  const at::Tensor host = mask.to(at::kCPU).contiguous();
  const int64_t rows = host.size(0);
  at::Tensor packed = at::full({(rows + 7) / 8}, 0xFF, at::TensorOptions().dtype(at::kByte));
  const bool* masked = host.const_data_ptr<bool>();
  uint8_t* bits = packed.mutable_data_ptr<uint8_t>();
  for (int64_t i = 0; i < rows; ++i) {
    if (!masked[i]) {
      bits[i / 8] &= static_cast<uint8_t>(~(1u << (i % 8)));
    }
  }
  return packed.to(device);
}

std::optional<at::Tensor> contiguous(const std::optional<at::Tensor>& t) {
  return t.has_value() ? std::optional<at::Tensor>(t->contiguous()) : std::nullopt;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> fused_linear_cross_entropy_loss_grad(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    const at::Tensor& target_mask, const at::Tensor& masked_target, double label_smoothing,
    const std::optional<at::Tensor>& logits_max, const std::optional<at::Tensor>& sum_exp_logits,
    const std::optional<at::Tensor>& softmax, std::optional<int64_t> scratch_bytes) {
  check_fused_linear_cross_entropy_loss_grad(grad, input, weight, target_mask, masked_target,
                                             label_smoothing, logits_max, sum_exp_logits,
                                             softmax, /*check_values=*/true);
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

  at::Tensor grad_c = grad.contiguous();
  at::Tensor input_c = input.contiguous();
  at::Tensor weight_c = weight.contiguous();
  at::Tensor mask = target_mask.scalar_type() == at::kBool
                        ? pack_bool_mask(target_mask, input.device())
                        : target_mask.contiguous();
  at::Tensor target_c = masked_target.contiguous();
  // The op reads logits_max / sum_exp_logits only when softmax is absent: pass exactly
  // one mode's inputs so its choice of mode is the one SPEC makes by `softmax is None`.
  std::optional<at::Tensor> max_c, sum_c, softmax_c;
  if (softmax.has_value()) {
    // High-performance mode: the op may overwrite softmax (declared `Tensor(a!)?`). A
    // non-contiguous softmax is copied, so the caller's tensor is then left intact.
    softmax_c = softmax->contiguous();
  } else {
    max_c = contiguous(logits_max);
    sum_c = contiguous(sum_exp_logits);
  }
  float smoothing = static_cast<float>(label_smoothing);  // the aclnn attribute is a float
  run_aclnn(k_fused_linear_cross_entropy_loss_grad, kBuiltinLimits, input.device(), grad_c,
            input_c, weight_c, mask, target_c, smoothing, max_c, sum_c, softmax_c, input_grad,
            weight_grad);
  return {input_grad, weight_grad};
}

}  // namespace ascend_ops::npu
