"""linear_cross_entropy: vocab-parallel cross entropy fused with the LM head, differentiable,
over torch.distributed.

    loss = F.cross_entropy(input @ full_weight.T, target)

where `full_weight` is the concatenation, over the ranks of `process_group`, of each
rank's vocabulary shard `weight` [V, H]. No rank ever holds the full logits, and in
memory-saving mode not even its own [BT, V] block (routes.py says which route runs a call).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from . import routes as _routes
from .call import MEMORY_SAVING, LinearCrossEntropyOutput
from .checks import make_call

__all__ = ["linear_cross_entropy"]


def linear_cross_entropy(
    input: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    *,
    linear_bias: torch.Tensor | None = None,
    ce_weight: torch.Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    logit_scale: float = 1.0,
    softcap: float | None = None,
    lse_square_scale: float = 0.0,
    return_z_loss: bool = False,
    return_lse: bool = False,
    return_token_accuracy: bool = False,
    process_group: dist.ProcessGroup | None = None,
    vocab_start_index: int | None = None,
    mode: str = MEMORY_SAVING,
    impl: str | None = None,
) -> torch.Tensor | LinearCrossEntropyOutput:
    """`F.cross_entropy(input @ W.T, target)` with W split by rows across `process_group`,
    and the loss options of torch's F.linear_cross_entropy and Liger-Kernel's fused linear
    cross entropy (SPEC §7; training/lce/option_math.py states the math).

    Args:
        input: [*, H] float16 or bfloat16 (float32 on CPU), the same on every rank.
        weight: [V, H] in input's dtype, this rank's vocabulary shard: global ids
            [vocab_start_index, vocab_start_index + V).
        target: [*] int32 or int64 global ids (input's leading shape); rows equal to
            `ignore_index` contribute nothing to the loss nor to any gradient (on CPU
            the step skips them: training/lce/kept_rows.py).
        linear_bias: [V] in input's dtype, the head's bias for this shard (torch's name),
            differentiable.
        ce_weight: [V] floating, this shard's class weights (torch's `weight` of
            F.cross_entropy; Liger's name, as `weight` is the head here). "mean" divides
            by the summed weight of the kept rows' targets.
        reduction: "mean" (over rows not ignored), "sum" or "none" (shape of target).
        label_smoothing: in [0, 1], torch's semantics (with class weights and
            ignore_index as F.cross_entropy), over the whole vocabulary of all shards.
        logit_scale: > 0; the logits (bias included) are multiplied by it first.
        softcap: > 0 or None; logits become softcap * tanh(logits / softcap).
        lse_square_scale: >= 0; adds lse_square_scale * logsumexp(logits)**2 per kept
            row (z-loss; "mean" divides it by the number of kept rows).
        return_z_loss, return_lse, return_token_accuracy: also return the z-loss term
            (reduced as the loss), the per-row logsumexp [*] (float32), the fraction of
            kept rows whose target is the argmax over the whole vocabulary (per row for
            "none"); none of them differentiable.
        process_group: the ranks holding the other shards; None for a single device.
        vocab_start_index: first global id of this shard; default `rank * V`.
        mode: "memory-saving" (the backward recomputes the logits; on CPU in bfloat16
            the forward keeps the bf16 logits gradient instead where it fits
            ASCEND_OPS_LCE_GRAD_CACHE_MIB, default 128 MiB) or "high-performance" (the
            forward keeps this shard's [BT, V] float32 softmax; on CPU in bfloat16 the bf16
            logits gradient, whatever its size).
        impl: the route ("auto" or None: chosen by device and options; or one of
            "fused-plain", "cpu-options", "npu-operators", "npu-composition+operators",
            "npu-composition+custom", see training/lce/routes.py). A route that cannot
            run the call raises ValueError with every route's reason.

    Returns:
        The loss, float32; with a `return_*` flag a LinearCrossEntropyOutput(loss, z_loss,
        lse, token_accuracy) with None for what was not asked. The loss's gradient w.r.t.
        `input` is this shard's part: summed over the ranks of the group it is the full
        input gradient (wrap `input` with `ascend_ops.distributed.all_reduce_grad` to get
        that sum); the gradients w.r.t. `weight` and `linear_bias` are this shard's own.
    """
    call = make_call(
        input, weight, target, linear_bias=linear_bias, ce_weight=ce_weight,
        ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing,
        logit_scale=logit_scale, softcap=softcap, lse_square_scale=lse_square_scale,
        return_z_loss=return_z_loss, return_lse=return_lse,
        return_token_accuracy=return_token_accuracy, process_group=process_group,
        vocab_start_index=vocab_start_index, mode=mode)
    route = _routes.resolve(call, impl)
    loss, z_loss, lse, accuracy = _routes.run(route, call)
    if call.options.returns_extra:
        return LinearCrossEntropyOutput(loss, z_loss, lse, accuracy)
    return loss
