"""The "cpu-options" route: linear_cross_entropy with any loss option, or in float32, on CPU
tensors. The options run inside the fused kernels (op_plugin/csrc/cpu/cross_entropy/
lce_options.h, one option stage in logit_options.h), never holding [BT, V]; the math on
row statistics is option_math.py's.

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

from dataclasses import dataclass

import torch

from ... import _extension
from . import grad_cache as _grad_cache
from . import option_math as _math
from .call import MEMORY_SAVING, LceCall, LossOptions
from .statistics import check_one_owner

__all__ = ["why_not", "forward", "backward"]

#: Vocabulary columns per chunk of the recomputing backward; None: at most 32 MiB of fp32
#: logits (lce_options.h). Tests set it small to run several chunks and a tail.
BACKWARD_CHUNK_COLUMNS: int | None = None


def why_not(call: LceCall) -> str | None:
    """Why this route cannot run `call`, or None."""
    if call.input.device.type != "cpu":
        return f"runs on CPU tensors, got {call.input.device.type} tensors"
    if _extension.load_error is not None:
        return f"needs the native library: {_extension.load_error}"
    return None


@dataclass
class Saved:
    x: torch.Tensor
    weight: torch.Tensor
    bias32: torch.Tensor | None
    class_weight32: torch.Tensor | None
    targets: _math.RowTargets
    options: LossOptions
    reduction: str
    grad_cache: torch.Tensor | None        # G for a unit upstream gradient, when cached
    stats: dict | None                     # the global max and exp sum, when recomputing


def forward(call: LceCall):
    """((loss, z_loss, lse, token_accuracy), Saved) for x [BT, H] against this shard."""
    native = _extension.native()
    x, weight, rows, options = call.x, call.weight, call.rows, call.options
    start, group = call.vocab_start_index, call.process_group
    bt, vocab = x.size(0), weight.size(0)
    targets = _math.row_targets(rows, call.ignore_index, start, vocab, call.ce_weight, group)
    want_weighted = options.label_smoothing != 0.0
    want_argmax = options.return_token_accuracy
    cw = call.ce_weight.float().contiguous() if call.ce_weight is not None else None
    b32 = call.linear_bias.float().contiguous() if call.linear_bias is not None else None
    cache_rows = 0
    if x.dtype == torch.bfloat16:
        cache_rows = _grad_cache.plan_chunk_rows(x, weight, call.needs_grad, group,
                                                 bounded=call.mode == MEMORY_SAVING)
    chunk = cache_rows or _grad_cache.chunk_rows(bt, vocab)
    a, b = _math.upstream_scales(targets, call.reduction)

    logits = _grad_cache.kept_logits_chunk(native, min(chunk, max(bt, 1)), vocab)
    cache = _grad_cache.kept_grad_cache(native, bt, vocab, x.dtype) if cache_rows else None
    parts = []
    for r0 in range(0, bt, chunk):
        rs = slice(r0, min(bt, r0 + chunk))
        m, s, p, ws, am = native.lce_options_chunk_statistics(
            x[rs], weight, targets.columns[rs], logits, b32, options.logit_scale,
            options.softcap_or_zero, cw, want_weighted, want_argmax)
        local = {"max": m, "sum": s, "predicted": p}
        if want_weighted:
            local["weighted"] = ws
        if want_argmax:
            local["argmax"] = am
        if cache is not None:
            # G is written from this chunk's logits: its statistics are made global here,
            # in chunks every rank agreed on (plan_chunk_rows)
            local = _math.combine_statistics(local, targets, rs, start, group)
            alpha, beta, gamma = _math.coefficients(local, targets.rows(rs), options, a[rs], b[rs])
            native.lce_options_write_grad_rows(
                logits, local["max"], local["sum"], targets.columns[rs], alpha, beta, gamma,
                options.logit_scale, options.softcap_or_zero, cw, cache[rs])
        parts.append(local)
    stats = _math.concat_statistics(parts, x, options)
    if cache is None:  # one combine for all rows: the chunk count follows this shard's V
        stats = _math.combine_statistics(stats, targets, slice(0, bt), start, group)
    check_one_owner((stats["owners"] != 1) & targets.kept, rows, stats["owners"],
                    call.ignore_index)
    ce, z = _math.row_losses(stats, targets, options)
    outputs = _math.reduce_outputs(ce, z, stats, targets, options, call.reduction,
                                   call.target.shape)
    kept_stats = None if cache is not None else {"max": stats["max"], "sum": stats["sum"]}
    return outputs, Saved(x, weight, b32, cw, targets, options, call.reduction, cache, kept_stats)


def backward(saved: Saved, grad_loss: torch.Tensor, wants):
    """(input_grad, weight_grad, bias_grad), None for what is not wanted."""
    want_x, want_w, want_b = wants
    want_b = want_b and saved.bias32 is not None
    x, weight, targets = saved.x, saved.weight, saved.targets
    native = _extension.native()
    upstream = _math.upstream_rows(grad_loss, saved.reduction, x.size(0))
    if saved.grad_cache is not None:
        # G holds the gradient for a unit upstream gradient: scale its rows
        row_scale = upstream.masked_fill(~targets.kept, 1.0).contiguous()
        input_grad, weight_grad = _grad_cache.backward(saved.grad_cache, row_scale, x, weight,
                                                       want_x, want_w)
        bias_grad = (native.lce_cached_bias_grad(saved.grad_cache, row_scale, weight.size(0))
                     if want_b else None)
    else:
        a, b = _math.upstream_scales(targets, saved.reduction)
        alpha, beta, gamma = _math.coefficients(saved.stats, targets, saved.options,
                                                a * upstream, b * upstream)
        input_grad, weight_grad, bias_grad = native.lce_options_backward(
            x, weight, targets.columns, saved.stats["max"], saved.stats["sum"], alpha, beta,
            gamma, saved.bias32, saved.options.logit_scale, saved.options.softcap_or_zero,
            saved.class_weight32, want_x, want_w, want_b, BACKWARD_CHUNK_COLUMNS)
    if bias_grad is not None:
        bias_grad = bias_grad.to(x.dtype)
    return input_grad, weight_grad, bias_grad
