"""torch_npu's names and signatures for the fused linear cross entropy operators.

Code written against torch_npu runs on CPU by taking these three functions from
ascend_ops instead: same names, same parameters, same defaults, same results (SPEC §1, §3).
Each picks the implementation by device, like `impl="auto"`.
"""

from __future__ import annotations

import torch

from . import ops

__all__ = [
    "npu_fused_linear_online_max_sum",
    "npu_fused_cross_entropy_loss_with_max_sum",
    "npu_fused_linear_cross_entropy_loss_with_max_sum_backward",
]


def npu_fused_linear_online_max_sum(input, weight, target, vocab_start_index, vocab_end_index,
                                    return_logits=False):
    """torch_npu.npu_fused_linear_online_max_sum: see `ascend_ops.fused_linear_online_max_sum`."""
    return ops.fused_linear_online_max_sum(input, weight, target, vocab_start_index,
                                           vocab_end_index, return_logits)


def npu_fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits, *,
                                              label_smoothing=0.0, input=None, weight=None,
                                              vocab_parallel_logits=None):
    """torch_npu.npu_fused_cross_entropy_loss_with_max_sum: see
    `ascend_ops.fused_cross_entropy_loss_with_max_sum`."""
    return ops.fused_cross_entropy_loss_with_max_sum(
        logits_max, sum_exp_logits, predicted_logits, label_smoothing=label_smoothing,
        input=input, weight=weight, vocab_parallel_logits=vocab_parallel_logits)


def npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
        grad, input, weight, target_mask, masked_target, label_smoothing=0.0, logits_max=None,
        sum_exp_logits=None, softmax=None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward: see
    `ascend_ops.fused_linear_cross_entropy_loss_grad`."""
    return ops.fused_linear_cross_entropy_loss_grad(
        grad, input, weight, target_mask, masked_target, label_smoothing, logits_max,
        sum_exp_logits, softmax)
