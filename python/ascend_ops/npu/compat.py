"""torch_npu's names and signatures for the fused linear cross entropy operators.

Code written against torch_npu runs on CPU by taking these three functions from
ascend_ops instead: the names, parameters, defaults and return conventions of torch_npu
2.13.0 (its schemas in `npu_native_functions_by_codegen.yaml` and its API docs), the
results of SPEC §1, §3. Each picks the implementation by device, like `impl="auto"`.

Where torch_npu's conventions differ from ascend_ops' own functions, these follow torch_npu:
- an output that was not asked for is None (torch_npu returns an undefined tensor, which
  Python sees as None), where ascend_ops' own functions return an empty tensor;
- `npu_fused_cross_entropy_loss_with_max_sum` takes `label_smoothing=None` as 0.0 and
  accepts `input=` / `weight=` tensors. torch_npu hands them to aclnn, whose API reserves
  them ("only null is supported") and whose kernel does not read them: they do not enter
  the result, here either. They are not passed on, so on an NPU the aclnn op gets null.
"""

from __future__ import annotations

import torch

from .. import ops

__all__ = [
    "npu_fused_linear_online_max_sum",
    "npu_fused_cross_entropy_loss_with_max_sum",
    "npu_fused_linear_cross_entropy_loss_with_max_sum_backward",
]


def npu_fused_linear_online_max_sum(input, weight, target, vocab_start_index, vocab_end_index,
                                    return_logits=False):
    """torch_npu.npu_fused_linear_online_max_sum: see `ascend_ops.fused_linear_online_max_sum`.

    Returns (logits_max, sum_exp_logits, predicted_logits, target_mask, masked_target,
    vocab_parallel_logits), the last None unless `return_logits`.
    """
    outputs = ops.fused_linear_online_max_sum(input, weight, target, vocab_start_index,
                                              vocab_end_index, return_logits)
    return (*outputs[:5], outputs[5] if return_logits else None)


def npu_fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits, *,
                                              label_smoothing=0.0, input=None, weight=None,
                                              vocab_parallel_logits=None):
    """torch_npu.npu_fused_cross_entropy_loss_with_max_sum: see
    `ascend_ops.fused_cross_entropy_loss_with_max_sum`.

    Returns (loss, softmax), softmax None when `vocab_parallel_logits` is None.
    `input` and `weight` are accepted and, as on the NPU, not used.
    """
    op = "npu_fused_cross_entropy_loss_with_max_sum"
    for name, value in (("input", input), ("weight", weight)):
        if value is not None and not isinstance(value, torch.Tensor):
            raise TypeError(f"{op}: '{name}' must be a Tensor or None, got {type(value).__name__}")
    loss, softmax = ops.fused_cross_entropy_loss_with_max_sum(
        logits_max, sum_exp_logits, predicted_logits,
        label_smoothing=0.0 if label_smoothing is None else label_smoothing,
        vocab_parallel_logits=vocab_parallel_logits)
    return loss, softmax if vocab_parallel_logits is not None else None


def npu_fused_linear_cross_entropy_loss_with_max_sum_backward(
        grad, input, weight, target_mask, masked_target, label_smoothing=0.0, logits_max=None,
        sum_exp_logits=None, softmax=None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch_npu.npu_fused_linear_cross_entropy_loss_with_max_sum_backward: see
    `ascend_ops.fused_linear_cross_entropy_loss_grad`. Returns (input_grad, weight_grad)."""
    return ops.fused_linear_cross_entropy_loss_grad(
        grad, input, weight, target_mask, masked_target, label_smoothing, logits_max,
        sum_exp_logits, softmax)
