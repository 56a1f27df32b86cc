"""linear_cross_entropy with loss options on CPU: the options run inside the fused kernels
(op_plugin/csrc/cpu/cross_entropy/lce_options.h, one option stage in logit_options.h),
never holding [BT, V]; the math on row statistics is lce_options.py's.

Forward, in row chunks of at most 48 MiB of fp32 logits: the chunk's raw logits, the
options applied in place, the row statistics (max, exp sum, target logit, weighted sum
for label smoothing, argmax for token accuracy), made global across the ranks. Then, as
for plain cross entropy (grad_cache.py): in bfloat16, when gradients are wanted and the
bf16 logits gradient G fits ASCEND_OPS_LCE_GRAD_CACHE_MIB (always in high-performance
mode), G is formed there from the chunk's logits and the backward is two GEMMs on it
(plus a column sum for the bias); otherwise the forward keeps the row statistics and the
backward recomputes the logits one vocabulary chunk at a time (lce_options_backward).
float16 and float32 always recompute.
"""

from __future__ import annotations

import torch

from .. import _extension
from . import grad_cache as _grad_cache
from . import lce_options as _math
from .vocab_parallel import check_one_owner

__all__ = ["options_linear_cross_entropy"]

#: Vocabulary columns per chunk of the recomputing backward; None: at most 32 MiB of fp32
#: logits (lce_options.h). Tests set it small to run several chunks and a tail.
BACKWARD_CHUNK_COLUMNS: int | None = None


def options_linear_cross_entropy(x, weight, bias, rows, ce_weight, options, ignore_index,
                                 reduction, group, start, mode, needs_grad, shape):
    """The loss and the extra outputs for x [BT, H], this shard's weight [V, H] (and bias,
    class weights [V]), rows [BT]; `shape` is the target's (for "none")."""
    outputs = _CpuOptionsFunction.apply(x, weight, bias, rows, ce_weight, options,
                                        ignore_index, reduction, group, start, mode,
                                        needs_grad, shape)
    loss, z_loss, lse, accuracy = outputs
    return loss, (z_loss if options.return_z_loss else None), \
        (lse if options.return_lse else None), \
        (accuracy if options.return_token_accuracy else None)


def _chunk_rows(bt: int, vocab: int) -> int:
    most = max(1, min(bt, _grad_cache.CHUNK_LOGITS_BYTES // max(1, vocab * 4)))
    return -(-bt // -(-bt // most)) if bt else 1  # ceil(bt / number of chunks)


class _CpuOptionsFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, rows, ce_weight, options, ignore_index, reduction, group,
                start, mode, needs_grad, shape):
        native = _extension.native()
        bt, vocab = x.size(0), weight.size(0)
        targets = _math.row_targets(rows, ignore_index, start, vocab, ce_weight, group)
        want_weighted = options.label_smoothing != 0.0
        want_argmax = options.return_token_accuracy
        cw = ce_weight.float().contiguous() if ce_weight is not None else None
        b32 = bias.float().contiguous() if bias is not None else None
        cache_rows = 0
        if x.dtype == torch.bfloat16:
            cache_rows = _grad_cache.plan_chunk_rows(x, weight, needs_grad, group,
                                                     bounded=mode == "memory-saving")
        chunk = cache_rows or _chunk_rows(bt, vocab)
        a, b = _math.upstream_scales(targets, reduction)

        logits = _grad_cache.kept_logits_chunk(native, min(chunk, max(bt, 1)), vocab)
        cache = _grad_cache.kept_grad_cache(native, bt, vocab, x.dtype) if cache_rows else None
        parts = []
        for r0 in range(0, bt, chunk):
            rs = slice(r0, min(bt, r0 + chunk))
            m, s, p, ws, am = native.lce_options_chunk_statistics(
                x[rs], weight, targets.columns[rs], logits, b32, options.logit_scale,
                options.softcap or 0.0, cw, want_weighted, want_argmax)
            local = {"max": m, "sum": s, "predicted": p}
            if want_weighted:
                local["weighted"] = ws
            if want_argmax:
                local["argmax"] = am
            stats = _math.combine_statistics(local, targets, rs, start, group)
            if cache is not None:
                chunk_targets = _slice_targets(targets, rs)
                alpha, beta, gamma = _math.coefficients(stats, chunk_targets, options, a[rs], b[rs])
                native.lce_options_write_grad_rows(
                    logits, stats["max"], stats["sum"], targets.columns[rs], alpha, beta, gamma,
                    options.logit_scale, options.softcap or 0.0, cw, cache[rs])
            parts.append(stats)
        stats = _concat(parts, x)
        check_one_owner((stats["owners"] != 1) & targets.kept, rows, stats["owners"], ignore_index)
        ce, z = _math.row_losses(stats, targets, options)
        loss, z_loss, lse, accuracy = _math.reduce_outputs(ce, z, stats, targets, options,
                                                           reduction, shape)
        ctx.reduction, ctx.options, ctx.targets = reduction, options, targets
        ctx.has_bias = bias is not None
        ctx.cached = cache is not None
        if cache is not None:
            ctx.save_for_backward(x, weight, cache, b32, cw)
        else:
            ctx.stats = {"max": stats["max"], "sum": stats["sum"]}
            ctx.save_for_backward(x, weight, None, b32, cw)
        extras = [t if t is not None else loss.new_empty(0) for t in (z_loss, lse, accuracy)]
        ctx.mark_non_differentiable(*extras)
        return (loss, *extras)

    @staticmethod
    def backward(ctx, grad_loss, *_extra_grads):
        x, weight, cache, b32, cw = ctx.saved_tensors
        want_x, want_w, want_b = ctx.needs_input_grad[:3]
        targets, options = ctx.targets, ctx.options
        native = _extension.native()
        if ctx.reduction == "none":
            upstream = grad_loss.reshape(-1).float()
        else:
            upstream = grad_loss.float().reshape(1).expand(x.size(0))
        if ctx.cached:
            # G holds the gradient for a unit upstream gradient: scale its rows
            row_scale = upstream.masked_fill(~targets.kept, 1.0).contiguous()
            input_grad, weight_grad = _grad_cache.backward(cache, row_scale, x, weight,
                                                           want_x, want_w)
            bias_grad = (native.lce_cached_bias_grad(cache, row_scale, weight.size(0))
                         if want_b else None)
        else:
            a, b = _math.upstream_scales(targets, ctx.reduction)
            alpha, beta, gamma = _math.coefficients(ctx.stats, targets, options,
                                                    a * upstream, b * upstream)
            input_grad, weight_grad, bias_grad = native.lce_options_backward(
                x, weight, targets.columns, ctx.stats["max"], ctx.stats["sum"], alpha, beta,
                gamma, b32, options.logit_scale, options.softcap or 0.0, cw, want_x, want_w,
                want_b, BACKWARD_CHUNK_COLUMNS)
        if bias_grad is not None:
            bias_grad = bias_grad.to(x.dtype)
        return (input_grad, weight_grad, bias_grad) + (None,) * 10


def _slice_targets(targets: _math.RowTargets, rs: slice) -> _math.RowTargets:
    tw = targets.target_weight[rs] if targets.target_weight is not None else None
    return _math.RowTargets(targets.kept[rs], targets.in_shard[rs], targets.columns[rs],
                            targets.ids[rs], tw, targets.classes, targets.weight_total,
                            targets.shard_weight_total, targets.count, targets.weight_sum)


def _concat(parts: list[dict], x: torch.Tensor) -> dict:
    if not parts:  # no rows
        empty = x.new_empty(0, dtype=torch.float32)
        return {"max": empty, "sum": empty, "predicted": empty, "owners": empty,
                "weighted": empty, "argmax": x.new_empty(0, dtype=torch.int64)}
    return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}
