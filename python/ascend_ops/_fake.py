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

    @torch.library.register_fake("ascend_ops::fused_linear_online_max_sum")
    def _(input, weight, target, vocab_start_index, vocab_end_index, return_logits=False):
        native().check_fused_linear_online_max_sum(input, weight, target, vocab_start_index,
                                                  vocab_end_index)
        bt = input.shape[0]

        def row_stat() -> torch.Tensor:
            return input.new_empty((bt,), dtype=torch.float32)

        logits_shape = (bt, weight.shape[0]) if return_logits else (0,)
        return (row_stat(), row_stat(), row_stat(),
                input.new_empty(((bt + 7) // 8,), dtype=torch.uint8),
                target.new_empty((bt,)), input.new_empty(logits_shape))

    @torch.library.register_fake("ascend_ops::fused_cross_entropy_loss_with_max_sum")
    def _(logits_max, sum_exp_logits, predicted_logits, *, label_smoothing=0.0, input=None,
          weight=None, vocab_parallel_logits=None):
        native().check_fused_cross_entropy_loss_with_max_sum(
            logits_max, sum_exp_logits, predicted_logits, label_smoothing, input, weight,
            vocab_parallel_logits)
        softmax_shape = (0,) if vocab_parallel_logits is None else vocab_parallel_logits.shape
        return logits_max.new_empty(logits_max.shape), logits_max.new_empty(softmax_shape)
