"""The "fused-plain" route: plain cross entropy (no option, nothing extra returned) in
float16 or bfloat16 on any device, on the SPEC §3 forward operators and the SPEC §1
backward operator.

Memory-saving mode keeps only row statistics and the backward recomputes the logits chunk
by chunk (fused_linear_cross_entropy_loss_grad); high-performance mode keeps this shard's
[BT, V] softmax. On CPU in bfloat16 the forward instead forms the bf16 logits gradient and
keeps it when it fits a budget (grad_cache.py), and the step runs on the kept rows only
(kept_rows.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ... import ops
from ...masks import unpack_target_mask
from . import grad_cache as _grad_cache
from . import kept_rows as _kept_rows
from .call import HIGH_PERFORMANCE, MEMORY_SAVING, LceCall
from .statistics import check_one_owner, combine_row_statistics

__all__ = ["why_not", "forward", "backward"]


def why_not(call: LceCall) -> str | None:
    """Why this route cannot run `call`, or None."""
    if call.input.dtype == torch.float32:
        return "the fused operators take float16 or bfloat16, got float32"
    if not call.plain:
        extra = call.active_options() + [
            name for name in ("return_z_loss", "return_lse") if getattr(call.options, name)]
        return f"computes plain cross entropy only, and the call sets {', '.join(extra)}"
    return None


@dataclass
class Saved:
    """What the backward reads. x and the per-row tensors are the kept rows' (kept_rows.py)."""

    x: torch.Tensor
    weight: torch.Tensor
    ignored: torch.Tensor
    # the kept rows' indices, None for every row (read by tests: no saved tensor)
    kept: torch.Tensor | None = field(metadata={"saved": "attribute"})
    total_rows: int
    reduction: str
    count: torch.Tensor             # kept rows, a tensor: reading it would stall a device
    grad_cached: bool = False       # the logits gradient was formed in the forward
    grad_cache: torch.Tensor | None = None   # G for a unit upstream gradient (cached path)
    target_mask: torch.Tensor | None = None
    masked_target: torch.Tensor | None = None
    logits_max: torch.Tensor | None = None
    sum_exp: torch.Tensor | None = None
    # high-performance mode; the operator's scratch in the backward: handed over once
    # (routes.py), so that a second backward recomputes from the statistics instead
    softmax: torch.Tensor | None = field(default=None, metadata={"saved": "once"})


def forward(call: LceCall):
    """((loss, None, None, None), Saved)."""
    x, rows, weight, group = call.x, call.rows, call.weight, call.process_group
    ignored = rows == call.ignore_index
    count = (~ignored).sum()
    # On CPU the step runs on the kept rows only (kept_rows.py): x [BT', H] from here
    kept = _kept_rows.kept_row_index(ignored, weight.size(0), group)
    total_rows = rows.numel()
    x, rows, ignored = (_kept_rows.gather(t, kept) for t in (x, rows, ignored))
    saved = Saved(x, weight, ignored, kept, total_rows, call.reduction, count)
    # -1 lies in no shard (shards start at >= 0), so an ignored row is masked everywhere.
    shard_target = torch.where(ignored, -1, rows)
    chunk_rows = _grad_cache.plan_chunk_rows(x, weight, call.needs_grad, group,
                                             bounded=call.mode == MEMORY_SAVING)
    if chunk_rows:
        row_loss = _forward_caching_grad(call, saved, rows, shard_target, chunk_rows)
    else:
        row_loss = _forward_keeping_statistics(call, saved, rows, shard_target)
    row_loss = _kept_rows.scatter(row_loss.masked_fill(ignored, 0.0), kept, call.target.numel())
    if call.reduction == "mean":
        loss = row_loss.sum() / count
    elif call.reduction == "sum":
        loss = row_loss.sum()
    else:
        loss = row_loss.view(call.target.shape)
    return (loss, None, None, None), saved


def _forward_keeping_statistics(call, saved, rows, shard_target):
    """Row statistics (and, in high-performance mode, the softmax) for the backward's
    fused_linear_cross_entropy_loss_grad."""
    x, weight, start = saved.x, saved.weight, call.vocab_start_index
    keep_logits = call.mode == HIGH_PERFORMANCE
    logits_max, sum_exp, predicted, target_mask, masked_target, logits = \
        ops.fused_linear_online_max_sum(x, weight, shard_target, start,
                                        start + weight.size(0), keep_logits)
    owned = (~unpack_target_mask(target_mask, x.size(0))).float()
    logits_max, sum_exp, predicted, owners = combine_row_statistics(
        logits_max, sum_exp, predicted, owned, call.process_group)
    check_one_owner((owners != 1) & ~saved.ignored, rows, owners, call.ignore_index)
    row_loss, softmax = ops.fused_cross_entropy_loss_with_max_sum(
        logits_max, sum_exp, predicted, vocab_parallel_logits=logits if keep_logits else None)
    saved.target_mask, saved.masked_target = target_mask, masked_target
    saved.logits_max, saved.sum_exp = logits_max, sum_exp
    saved.softmax = softmax if keep_logits else None
    return row_loss


def _forward_caching_grad(call, saved, rows, shard_target, chunk_rows):
    """Memory-saving mode with the logits gradient formed here (grad_cache.py)."""
    x, weight, start, group = saved.x, saved.weight, call.vocab_start_index, call.process_group
    ids = shard_target.long()  # an int32 tensor against a start past 2**31 would wrap
    in_shard = (ids >= start) & (ids < start + weight.size(0))
    columns = torch.where(in_shard, ids - start, -1)
    # G is formed for the upstream gradient a loss.backward() passes: 1 / count for
    # "mean", 1 otherwise; 0 on ignored rows. The backward applies any other.
    scale = 1.0 / saved.count.clamp_min(1) if call.reduction == "mean" else torch.tensor(1.0)
    row_scale = torch.where(saved.ignored, 0.0, scale.float().expand(x.size(0))).contiguous()
    combine = None if group is None else (  # None: one shard's statistics are global
        lambda m, s, p, owned: combine_row_statistics(m, s, p, owned, group))
    grad_cache, logits_max, sum_exp, predicted, owners = _grad_cache.forward(
        x, weight, columns, in_shard.float(), row_scale, chunk_rows, combine)
    check_one_owner((owners != 1) & ~saved.ignored, rows, owners, call.ignore_index)
    row_loss, _ = ops.fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp, predicted)
    saved.grad_cache, saved.grad_cached = grad_cache, True
    return row_loss


def backward(saved: Saved, grad_loss: torch.Tensor, wants):
    """(input_grad, weight_grad, None): x, grad_loss's rows and the input gradient are the
    kept rows' until the input gradient is scattered back."""
    want_x, want_w, _ = wants
    if saved.grad_cached:
        if saved.reduction == "none":  # ignored rows of G are 0 whatever their gradient
            row_scale = _kept_rows.gather(grad_loss.reshape(-1), saved.kept).float() \
                .masked_fill(saved.ignored, 1.0)
        else:  # "mean"'s 1 / count is in G already
            row_scale = grad_loss.float().reshape(1).expand(saved.x.size(0))
        input_grad, weight_grad = _grad_cache.backward(
            saved.grad_cache, row_scale, saved.x, saved.weight, want_x, want_w)
    else:
        if saved.reduction == "none":
            grad_rows = _kept_rows.gather(grad_loss.reshape(-1), saved.kept).float()
        else:
            # mean over the rows not ignored; with none left every row's gradient is 0 below
            scale = 1.0 / saved.count.clamp_min(1) if saved.reduction == "mean" else 1.0
            grad_rows = (grad_loss.float() * scale).expand(saved.x.size(0))
        grad_rows = grad_rows.masked_fill(saved.ignored, 0.0).contiguous()
        softmax = saved.softmax
        input_grad, weight_grad = ops.fused_linear_cross_entropy_loss_grad(
            grad_rows, saved.x, saved.weight, saved.target_mask, saved.masked_target, 0.0,
            None if softmax is not None else saved.logits_max,
            None if softmax is not None else saved.sum_exp, softmax)
    if input_grad is not None:
        input_grad = _kept_rows.scatter(input_grad, saved.kept, saved.total_rows)
    return (input_grad if want_x else None), (weight_grad if want_w else None), None
