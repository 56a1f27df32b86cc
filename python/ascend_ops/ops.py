"""The public operators: one typed function per op, choosing an implementation by `impl`."""

from __future__ import annotations

import torch

from . import reference
from .npu import adapter as _npu_adapter
from .sim import simulator as _sim
from ._arguments import (require_bool, require_int, require_number, require_optional_tensor,
                         require_tensor)
from ._extension import checks
from ._impls import resolve

__all__ = ["fused_linear_cross_entropy_loss_grad", "batch_norm_reduce_backward",
           "fused_linear_online_max_sum", "fused_cross_entropy_loss_with_max_sum"]


def fused_linear_cross_entropy_loss_grad(
    grad: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    target_mask: torch.Tensor,
    masked_target: torch.Tensor,
    label_smoothing: float = 0.0,
    logits_max: torch.Tensor | None = None,
    sum_exp_logits: torch.Tensor | None = None,
    softmax: torch.Tensor | None = None,
    *,
    impl: str = "auto",
    scratch_bytes: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Backward of vocab-parallel cross entropy fused with the LM head (SPEC §1).

    With `weight` this rank's vocabulary shard [V, H] and `logits = input @ weight.T`::

        P = softmax if softmax is not None else \\
            torch.exp(logits.float() - logits_max[:, None]) / sum_exp_logits[:, None]
        P[rows not masked, masked_target] -= 1
        G = (P * grad[:, None]).to(input.dtype)
        input_grad, weight_grad = G @ weight, G.T @ input   # fp32 accumulation

    Args:
        grad: float32 [BT], upstream gradient of each row's loss.
        input, weight: float16 or bfloat16 [BT, H] and [V, H], one dtype.
        target_mask: bit-packed uint8 [>= ceil(BT/8)] (LSB first) or bool [BT]; a set
            bit / True marks a row whose target is in another shard.
        masked_target: int32 or int64 [BT], the target's column in this shard; must lie
            in [0, V) on rows that are not masked.
        label_smoothing: only 0.0 is supported.
        logits_max, sum_exp_logits: float32 [BT], the global row statistics of the
            forward; required when `softmax` is None (memory-saving mode).
        softmax: float32 [BT, V] kept by the forward (high-performance mode). The op may
            use it as scratch: its contents are undefined afterwards (the CPU kernel on
            the onednn engine writes the logits gradient over it, SPEC §1).
        impl: "auto" (by device), "cpu", "npu", "npu_custom", "reference" or "sim"; see
            `available_impls()`.
        scratch_bytes: the CPU kernel's scratch budget for its vocabulary chunks
            (default: ASCEND_OPS_FLCE_SCRATCH_MIB, else 64 MiB or less, so that the
            whole call stays within its outputs plus half of the fp32 [BT, V] logits
            where the shapes allow; docs/cpu_kernels.md); other implementations
            ignore it.

    Returns:
        (input_grad [BT, H], weight_grad [V, H]), both in input's dtype.
    """
    op = "fused_linear_cross_entropy_loss_grad"
    for name, t in (("grad", grad), ("input", input), ("weight", weight),
                    ("target_mask", target_mask), ("masked_target", masked_target)):
        require_tensor(op, name, t)
    for name, t in (("logits_max", logits_max), ("sum_exp_logits", sum_exp_logits),
                    ("softmax", softmax)):
        require_optional_tensor(op, name, t)
    require_number(op, "label_smoothing", label_smoothing)
    require_int(op, "scratch_bytes", scratch_bytes, optional=True)
    args = (grad, input, weight, target_mask, masked_target, label_smoothing,
            logits_max, sum_exp_logits, softmax)
    chosen = resolve(impl, input.device, "fused_linear_cross_entropy_loss_grad")
    if chosen in ("reference", "sim"):
        checks().check_fused_linear_cross_entropy_loss_grad(*args, check_values=True)
        checks().check_scratch_bytes("fused_linear_cross_entropy_loss_grad", scratch_bytes)
        backend = reference if chosen == "reference" else _sim
        return backend.fused_linear_cross_entropy_loss_grad(*args)
    if chosen == "npu_custom":
        return _npu_adapter.run_custom("fused_linear_cross_entropy_loss_grad", *args,
                                       scratch_bytes=scratch_bytes)
    return torch.ops.ascend_ops.fused_linear_cross_entropy_loss_grad(
        *args, scratch_bytes=scratch_bytes)


def batch_norm_reduce_backward(
    grad_out: torch.Tensor,
    input: torch.Tensor,
    mean: torch.Tensor,
    invstd: torch.Tensor,
    weight: torch.Tensor | None,
    input_g: bool,
    weight_g: bool,
    bias_g: bool,
    *,
    impl: str = "auto",
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """Per-channel reductions of batch-norm backward, the core of SyncBatchNorm (SPEC §2).

    Reducing over every dim but 1 (`dims`), with `mean` shaped to broadcast over it::

        sum_dy      = grad_out.float().sum(dims)
        sum_dy_xmu  = (grad_out.float() * (input.float() - mean)).sum(dims)
        grad_weight = sum_dy_xmu * invstd
        grad_bias   = sum_dy

    Args:
        grad_out, input: [N, C, *] with 2 to 8 dims, one dtype (float32, float16 or
            bfloat16) and one shape.
        mean, invstd: [C], the batch statistics of the forward.
        weight: [C] or None; it does not enter the math (accepted for compatibility).
        input_g, weight_g, bias_g: which outputs to compute: sum_dy and sum_dy_xmu when
            input_g, grad_weight when weight_g, grad_bias when bias_g.
        impl: "auto" (by device), "cpu", "npu", "npu_custom", "reference" or "sim"; see
            `available_impls()`.

    Returns:
        (sum_dy, sum_dy_xmu, grad_weight, grad_bias), each [C] or None when not asked
        for; float16 when input and mean are both float16, float32 otherwise.
    """
    op = "batch_norm_reduce_backward"
    for name, t in (("grad_out", grad_out), ("input", input), ("mean", mean), ("invstd", invstd)):
        require_tensor(op, name, t)
    require_optional_tensor(op, "weight", weight)
    for name, flag in (("input_g", input_g), ("weight_g", weight_g), ("bias_g", bias_g)):
        require_bool(op, name, flag)
    args = (grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g)
    chosen = resolve(impl, input.device, "batch_norm_reduce_backward")
    if chosen in ("reference", "sim"):
        checks().check_batch_norm_reduce_backward(grad_out, input, mean, invstd, weight)
        backend = reference if chosen == "reference" else _sim
        return backend.batch_norm_reduce_backward(*args)
    if chosen == "npu_custom":
        return _npu_adapter.run_custom("batch_norm_reduce_backward", *args)
    return torch.ops.ascend_ops.batch_norm_reduce_backward(*args)


def fused_linear_online_max_sum(
    input: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    vocab_start_index: int,
    vocab_end_index: int,
    return_logits: bool = False,
    *,
    impl: str = "auto",
) -> tuple[torch.Tensor, ...]:
    """This shard's row statistics of `logits = input @ weight.T` (SPEC §3, forward, local)::

        logits_max = logits.float().amax(1)
        sum_exp_logits = torch.exp(logits.float() - logits_max[:, None]).sum(1)
        masked = (target < vocab_start_index) | (target >= vocab_end_index)
        masked_target = torch.where(masked, 0, target - vocab_start_index)
        predicted_logits = torch.where(masked, 0, logits[rows, masked_target] - logits_max)

    Args:
        input, weight: float16 or bfloat16 [BT, H] and [V, H] (this rank's vocabulary
            shard), one dtype.
        target: int32 or int64 [BT], global vocabulary ids.
        vocab_start_index, vocab_end_index: this shard's ids, [start, end) with
            0 <= start <= end <= start + V.
        return_logits: also return the logits (high-performance mode); otherwise the
            [BT, V] logits are never held, only row chunks of them.
        impl: "auto" (by device), "cpu", "npu" or "reference"; see `available_impls()`.

    Returns:
        (logits_max, sum_exp_logits, predicted_logits) float32 [BT]; target_mask uint8
        [ceil(BT/8)], bit-packed LSB first, padding bits as CANN writes them
        (`masks.padding_masked`); masked_target [BT] in target's
        dtype; vocab_parallel_logits [BT, V] in input's dtype, or empty.
    """
    op = "fused_linear_online_max_sum"
    for name, t in (("input", input), ("weight", weight), ("target", target)):
        require_tensor(op, name, t)
    require_int(op, "vocab_start_index", vocab_start_index)
    require_int(op, "vocab_end_index", vocab_end_index)
    require_bool(op, "return_logits", return_logits)  # the reference would take "0" as True
    args = (input, weight, target, vocab_start_index, vocab_end_index, return_logits)
    if resolve(impl, input.device, "fused_linear_online_max_sum") == "reference":
        checks().check_fused_linear_online_max_sum(*args[:5])
        return reference.fused_linear_online_max_sum(*args)
    return torch.ops.ascend_ops.fused_linear_online_max_sum(*args)


def fused_cross_entropy_loss_with_max_sum(
    logits_max: torch.Tensor,
    sum_exp_logits: torch.Tensor,
    predicted_logits: torch.Tensor,
    *,
    label_smoothing: float = 0.0,
    input: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
    vocab_parallel_logits: torch.Tensor | None = None,
    impl: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row loss from the GLOBAL row statistics, and the softmax of kept logits (SPEC §3)::

        loss = torch.log(sum_exp_logits) - predicted_logits
        softmax = torch.exp(vocab_parallel_logits.float() - logits_max[:, None]) / sum_exp_logits[:, None]

    Args:
        logits_max, sum_exp_logits, predicted_logits: float32 [BT], combined over every
            vocabulary shard (see `ascend_ops.linear_cross_entropy` for the combination).
        label_smoothing: only 0.0 is supported. input, weight: only None is supported.
        vocab_parallel_logits: [BT, V] float32/float16/bfloat16, or None for no softmax.
        impl: "auto" (by device), "cpu", "npu" or "reference"; see `available_impls()`.

    Returns:
        (loss float32 [BT], softmax float32 [BT, V] or empty).
    """
    op = "fused_cross_entropy_loss_with_max_sum"
    for name, t in (("logits_max", logits_max), ("sum_exp_logits", sum_exp_logits),
                    ("predicted_logits", predicted_logits)):
        require_tensor(op, name, t)
    for name, t in (("input", input), ("weight", weight),
                    ("vocab_parallel_logits", vocab_parallel_logits)):
        require_optional_tensor(op, name, t)
    require_number(op, "label_smoothing", label_smoothing)
    if resolve(impl, logits_max.device, op) == "reference":
        checks().check_fused_cross_entropy_loss_with_max_sum(
            logits_max, sum_exp_logits, predicted_logits, label_smoothing, input, weight,
            vocab_parallel_logits)
        return reference.fused_cross_entropy_loss_with_max_sum(
            logits_max, sum_exp_logits, predicted_logits, label_smoothing=label_smoothing,
            input=input, weight=weight, vocab_parallel_logits=vocab_parallel_logits)
    return torch.ops.ascend_ops.fused_cross_entropy_loss_with_max_sum(
        logits_max, sum_exp_logits, predicted_logits, label_smoothing=label_smoothing,
        input=input, weight=weight, vocab_parallel_logits=vocab_parallel_logits)
