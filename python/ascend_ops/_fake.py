"""Fake (meta) kernels: output shapes and dtypes for torch.compile and meta tensors.

They run the same validation as the real kernels, minus the checks that must read
tensor values.
"""

from __future__ import annotations

import torch

from ._extension import native


def register() -> None:
    @torch.library.register_fake("ascend_ops::fused_linear_cross_entropy_loss_grad")
    def _(grad, input, weight, target_mask, masked_target, label_smoothing=0.0,
          logits_max=None, sum_exp_logits=None, softmax=None, *, scratch_bytes=None):
        native().check_fused_linear_cross_entropy_loss_grad(
            grad, input, weight, target_mask, masked_target, label_smoothing,
            logits_max, sum_exp_logits, softmax, check_values=False)
        native().check_scratch_bytes("fused_linear_cross_entropy_loss_grad", scratch_bytes)
        return input.new_empty(input.shape), weight.new_empty(weight.shape)

    @torch.library.register_fake("ascend_ops::batch_norm_reduce_backward")
    def _(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g):
        native().check_batch_norm_reduce_backward(grad_out, input, mean, invstd, weight)
        dtype = native().batch_norm_reduce_output_dtype(input.dtype, mean.dtype)

        def channel_sum(wanted: bool) -> torch.Tensor | None:
            return input.new_empty((input.shape[1],), dtype=dtype) if wanted else None

        return channel_sum(input_g), channel_sum(input_g), channel_sum(weight_g), channel_sum(bias_g)
