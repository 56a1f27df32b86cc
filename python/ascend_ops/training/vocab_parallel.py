"""linear_cross_entropy: vocab-parallel cross entropy fused with the LM head, differentiable,
over torch.distributed.

    loss = F.cross_entropy(input @ full_weight.T, target)

where `full_weight` is the concatenation, over the ranks of `process_group`, of each
rank's vocabulary shard `weight` [V, H]. No rank ever holds the full logits, and in
memory-saving mode not even its own [BT, V] block: the forward keeps only row statistics
and the backward recomputes the logits chunk by chunk (fused_linear_cross_entropy_loss_grad)
-- except on CPU, where the bf16 logits gradient is formed in the forward and kept when it
fits a fixed budget, saving the backward's logits GEMM (grad_cache.py).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from .. import ops
from ..masks import unpack_target_mask
from . import grad_cache as _grad_cache
from . import kept_rows as _kept_rows
from . import routes as _routes
from .checks import check_linear_cross_entropy
from .lce_options import LinearCrossEntropyOutput, check_loss_options, check_option_tensors

__all__ = ["linear_cross_entropy", "LinearCrossEntropyOutput", "MEMORY_SAVING", "HIGH_PERFORMANCE"]

MEMORY_SAVING = "memory-saving"
HIGH_PERFORMANCE = "high-performance"
_MODES = (MEMORY_SAVING, HIGH_PERFORMANCE)
_REDUCTIONS = ("mean", "sum", "none")


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
) -> torch.Tensor | LinearCrossEntropyOutput:
    """`F.cross_entropy(input @ W.T, target)` with W split by rows across `process_group`,
    and the loss options of torch's F.linear_cross_entropy and Liger-Kernel's fused linear
    cross entropy (SPEC §7; training/lce_options.py states the math).

    Args:
        input: [*, H] float16 or bfloat16 (float32 on CPU), the same on every rank.
        weight: [V, H] in input's dtype, this rank's vocabulary shard: global ids
            [vocab_start_index, vocab_start_index + V).
        target: [*] int32 or int64 global ids (input's leading shape); rows equal to
            `ignore_index` contribute nothing to the loss nor to any gradient (on CPU
            the step skips them: training/kept_rows.py).
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

    Returns:
        The loss, float32; with a `return_*` flag a LinearCrossEntropyOutput(loss, z_loss,
        lse, token_accuracy) with None for what was not asked. The loss's gradient w.r.t.
        `input` is this shard's part: summed over the ranks of the group it is the full
        input gradient (wrap `input` with `ascend_ops.distributed.all_reduce_grad` to get
        that sum); the gradients w.r.t. `weight` and `linear_bias` are this shard's own.
    """
    check_linear_cross_entropy(input, weight, target, ignore_index, reduction, process_group,
                               vocab_start_index, mode, modes=_MODES, reductions=_REDUCTIONS)
    options = check_loss_options(label_smoothing, logit_scale, softcap, lse_square_scale,
                                 return_z_loss, return_lse, return_token_accuracy)
    check_option_tensors(input, weight, linear_bias, ce_weight)
    if vocab_start_index is None:
        rank = 0 if process_group is None else dist.get_rank(process_group)
        vocab_start_index = rank * weight.size(0)
    # Inside the Function grad mode is off and needs_input_grad ignores torch.no_grad().
    needs_grad = torch.is_grad_enabled() and (
        input.requires_grad or weight.requires_grad
        or (linear_bias is not None and linear_bias.requires_grad))
    route = _routes.choose(input.device, input.dtype, options, linear_bias is not None,
                           ce_weight is not None)
    if route.fused_plain:
        return _LinearCrossEntropy.apply(input, weight, target, ignore_index, reduction,
                                         process_group, vocab_start_index, mode, needs_grad)
    x = input if input.dim() == 2 else input.reshape(-1, input.size(-1))
    loss, z_loss, lse, accuracy = _routes.run(
        route, x, weight, linear_bias, target.reshape(-1), ce_weight, options, ignore_index,
        reduction, process_group, vocab_start_index, mode, needs_grad, target.shape)
    if options.returns_extra:
        return LinearCrossEntropyOutput(loss, z_loss, lse, accuracy)
    return loss


def combine_row_statistics(logits_max, sum_exp_logits, predicted_logits, owned, group):
    """Local row statistics of each shard → global ones (SPEC §3), in two all-reduces:

        M = max_r m_r
        S = Σ_r s_r · exp(m_r − M)
        P = Σ_r p_r + (m_r − M)·owned_r         (p_r is relative to the local max m_r)

    `owned` (float, 1 where this shard holds the row's target) rides in the same sum, so
    the caller learns how many shards hold each target for free.
    """
    if group is None:
        return logits_max, sum_exp_logits, predicted_logits, owned
    global_max = logits_max.clone()
    dist.all_reduce(global_max, op=dist.ReduceOp.MAX, group=group)
    shift = logits_max - global_max  # <= 0; -inf for an empty shard
    stacked = torch.stack([
        sum_exp_logits * torch.exp(shift),
        predicted_logits + torch.where(owned > 0, shift, 0.0),
        owned,
    ])
    dist.all_reduce(stacked, op=dist.ReduceOp.SUM, group=group)
    return global_max, stacked[0], stacked[1], stacked[2]


def check_one_owner(bad: torch.Tensor, rows: torch.Tensor, owners: torch.Tensor,
                    ignore_index: int) -> None:
    """Every row not ignored must have its target in exactly one shard (`bad` marks those
    that do not). On CPU a ValueError names the first such row. On an accelerator reading
    `bad` would stall the host, so (as the NPU adapter's target check, SPEC §1) it is an
    asynchronous device-side assert where the backend registers one, a host check only
    under ASCEND_OPS_NPU_CHECK_TARGETS=1, and otherwise skipped; in a torch.compile'd
    graph, on any device, the asynchronous assert."""
    if torch.compiler.is_compiling():  # a traced graph cannot read `bad` on the host
        torch._assert_async(~bad.any(), "linear_cross_entropy: a 'target' is held by no "
                            "shard or by several (run uncompiled to see the row)")
        return
    on_host = bad.device.type == "cpu" or os.environ.get("ASCEND_OPS_NPU_CHECK_TARGETS") == "1"
    if not on_host:
        key = "CUDA" if bad.device.type == "cuda" else "PrivateUse1"
        if torch._C._dispatch_has_kernel_for_dispatch_key("aten::_assert_async.msg", key):
            torch._assert_async(~bad.any(), "linear_cross_entropy: a 'target' is held by no "
                                "shard or by several (ASCEND_OPS_NPU_CHECK_TARGETS=1 names the row)")
        return
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"linear_cross_entropy: 'target' must be a vocabulary id held by exactly one "
            f"shard (or ignore_index={ignore_index}), got target[{row}] = {int(rows[row])} "
            f"held by {int(owners[row])} shards")


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, target, ignore_index, reduction, group, start, mode,
                needs_grad):
        # BT x H; a 2-D input is used as it is: torch.compile cannot save a view of an
        # input for the backward
        x = input if input.dim() == 2 else input.reshape(-1, input.size(-1))
        rows = target.reshape(-1)  # BT
        ignored = rows == ignore_index
        count = (~ignored).sum()  # a tensor: reading it would stall an accelerator's host
        ctx.reduction, ctx.count, ctx.input_shape = reduction, count, input.shape
        # On CPU the step runs on the kept rows only (kept_rows.py): x [BT', H] from here
        kept = ctx.kept = _kept_rows.kept_row_index(ignored, weight.size(0), group)
        ctx.total_rows = rows.numel()
        x, rows, ignored = (_kept_rows.gather(t, kept) for t in (x, rows, ignored))
        # -1 lies in no shard (shards start at >= 0), so an ignored row is masked everywhere.
        shard_target = torch.where(ignored, -1, rows)
        chunk_rows = _grad_cache.plan_chunk_rows(x, weight, needs_grad, group,
                                                 bounded=mode == MEMORY_SAVING)
        if chunk_rows:
            row_loss = _LinearCrossEntropy._forward_caching_grad(
                ctx, x, weight, rows, ignored, shard_target, ignore_index, group, start,
                chunk_rows)
        else:
            row_loss = _LinearCrossEntropy._forward_keeping_statistics(
                ctx, x, weight, rows, ignored, shard_target, ignore_index, group, start, mode)
        row_loss = _kept_rows.scatter(row_loss.masked_fill(ignored, 0.0), kept, target.numel())
        if reduction == "mean":
            return row_loss.sum() / count
        if reduction == "sum":
            return row_loss.sum()
        return row_loss.view(target.shape)

    @staticmethod
    def _forward_keeping_statistics(ctx, x, weight, rows, ignored, shard_target, ignore_index,
                                    group, start, mode):
        """Row statistics (and, in high-performance mode, the softmax) for the backward's
        fused_linear_cross_entropy_loss_grad."""
        keep_logits = mode == HIGH_PERFORMANCE
        logits_max, sum_exp, predicted, target_mask, masked_target, logits = \
            ops.fused_linear_online_max_sum(x, weight, shard_target, start,
                                            start + weight.size(0), keep_logits)
        owned = (~unpack_target_mask(target_mask, x.size(0))).float()
        logits_max, sum_exp, predicted, owners = combine_row_statistics(
            logits_max, sum_exp, predicted, owned, group)
        check_one_owner((owners != 1) & ~ignored, rows, owners, ignore_index)
        row_loss, softmax = ops.fused_cross_entropy_loss_with_max_sum(
            logits_max, sum_exp, predicted,
            vocab_parallel_logits=logits if keep_logits else None)
        ctx.save_for_backward(x, weight, target_mask, masked_target, logits_max, sum_exp,
                              ignored)
        ctx.softmax = softmax if keep_logits else None  # the backward may use it as scratch
        ctx.grad_cached = False
        return row_loss

    @staticmethod
    def _forward_caching_grad(ctx, x, weight, rows, ignored, shard_target, ignore_index, group,
                              start, chunk_rows):
        """Memory-saving mode with the logits gradient formed here (grad_cache.py)."""
        ids = shard_target.long()  # an int32 tensor against a start past 2**31 would wrap
        in_shard = (ids >= start) & (ids < start + weight.size(0))
        columns = torch.where(in_shard, ids - start, -1)
        # G is formed for the upstream gradient a loss.backward() passes: 1 / count for
        # "mean", 1 otherwise; 0 on ignored rows. The backward applies any other.
        scale = 1.0 / ctx.count.clamp_min(1) if ctx.reduction == "mean" else torch.tensor(1.0)
        row_scale = torch.where(ignored, 0.0, scale.float().expand(x.size(0))).contiguous()
        combine = None if group is None else (  # None: one shard's statistics are global
            lambda m, s, p, owned: combine_row_statistics(m, s, p, owned, group))
        grad_cache, logits_max, sum_exp, predicted, owners = _grad_cache.forward(
            x, weight, columns, in_shard.float(), row_scale, chunk_rows, combine)
        check_one_owner((owners != 1) & ~ignored, rows, owners, ignore_index)
        row_loss, _ = ops.fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp, predicted)
        ctx.save_for_backward(x, weight, grad_cache, ignored)
        ctx.softmax = None
        ctx.grad_cached = True
        return row_loss

    @staticmethod
    def backward(ctx, grad_loss):
        # x, grad_loss's rows and the input gradient are the kept rows' (kept_rows.py)
        total = ctx.total_rows
        if ctx.grad_cached:
            x, weight, grad_cache, ignored = ctx.saved_tensors
            if ctx.reduction == "none":  # ignored rows of G are 0 whatever their gradient
                row_scale = _kept_rows.gather(grad_loss.reshape(-1), ctx.kept).float() \
                    .masked_fill(ignored, 1.0)
            else:  # "mean"'s 1 / count is in G already
                row_scale = grad_loss.float().reshape(1).expand(x.size(0))
            input_grad, weight_grad = _grad_cache.backward(
                grad_cache, row_scale, x, weight, *ctx.needs_input_grad[:2])
            if input_grad is not None:
                input_grad = _kept_rows.scatter(input_grad, ctx.kept, total).view(ctx.input_shape)
            return input_grad, weight_grad, None, None, None, None, None, None, None
        x, weight, target_mask, masked_target, logits_max, sum_exp, ignored = ctx.saved_tensors
        if ctx.reduction == "none":
            grad_rows = _kept_rows.gather(grad_loss.reshape(-1), ctx.kept).float()
        else:
            # mean over the rows not ignored; with none left every row's gradient is 0 below
            scale = 1.0 / ctx.count.clamp_min(1) if ctx.reduction == "mean" else 1.0
            grad_rows = (grad_loss.float() * scale).expand(x.size(0))
        grad_rows = grad_rows.masked_fill(ignored, 0.0).contiguous()
        softmax, ctx.softmax = ctx.softmax, None
        input_grad, weight_grad = ops.fused_linear_cross_entropy_loss_grad(
            grad_rows, x, weight, target_mask, masked_target, 0.0,
            None if softmax is not None else logits_max,
            None if softmax is not None else sum_exp, softmax)
        return (_kept_rows.scatter(input_grad, ctx.kept, total).view(ctx.input_shape), weight_grad,
                None, None, None, None, None, None, None)
