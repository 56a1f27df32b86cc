// The npu_custom backward of linear_cross_entropy's loss options (SPEC §7): our op
// package's FLCE with the options as inputs and attributes
// (FusedLinearCrossEntropyLossGradKernelNpuOpApi.cpp). Not one of the yaml's operators:
// no CPU kernel, no dispatcher entry; python/ascend_ops/npu/options_support.py calls it as
// ascend_ops._npu.fused_linear_cross_entropy_loss_grad_options_custom (module.cpp).
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace ascend_ops::npu {

// Memory-saving mode: input [BT, H], weight [V, H] (f16/bf16), target_mask bool [BT] or
// packed uint8, masked_target int32/int64 [BT], logits_max / sum_exp_logits / alpha / beta /
// gamma f32 [BT], bias / class_weight f32 [V] or none, logit_scale finite, softcap 0 (none)
// or a finite cap > 0. Returns (input_grad, weight_grad).
std::tuple<at::Tensor, at::Tensor> fused_linear_cross_entropy_loss_grad_options_custom(
    const at::Tensor& input, const at::Tensor& weight, const at::Tensor& target_mask,
    const at::Tensor& masked_target, const at::Tensor& logits_max,
    const at::Tensor& sum_exp_logits, const at::Tensor& alpha, const at::Tensor& beta,
    const at::Tensor& gamma, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& class_weight, double logit_scale, double softcap);

}  // namespace ascend_ops::npu
