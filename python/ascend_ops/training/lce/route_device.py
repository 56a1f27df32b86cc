"""The device routes of linear_cross_entropy with loss options ("npu-operators",
"npu-composition+operators", "npu-composition+custom"): device-agnostic torch over the
operators, chosen on an accelerator; they run on CPU tensors too (impl=), where the tests
check them against float64 autograd.

Forward, by route:
  "operators"    fused_linear_online_max_sum (SPEC §3) on the shard, the statistics made
                 global (option_math.combine_statistics); used only where the options do
                 not change the logits (class weights, returned lse / z-loss).
  "composition"  chunked torch on the device: per row chunk of at most 48 MiB of fp32
                 logits, logits = f32(x_c @ W.T), the logit transform (logits.py), the row
                 statistics (max, exp sum, target logit, weighted sum, argmax); never
                 [BT, V].
Backward, by route:
  "operators"    fused_linear_cross_entropy_loss_grad (SPEC §1, CANN's op on the NPU) in
                 memory-saving mode with grad = alpha (= beta: a·w[t] times the upstream
                 gradient), from the global statistics.
  "npu_custom"   our Ascend C op with the options in its vector stage
                 (route_npu_custom.py).
No host synchronisation: the counts, sums and coefficients stay tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ... import ops
from . import option_math as _math
from . import route_npu_custom as _custom
from .call import LceCall, LossOptions
from .logits import fp32_logits, transform_logits
from .statistics import check_one_owner

__all__ = ["why_not", "forward", "backward", "COMPOSITION_CHUNK_BYTES"]

#: fp32 logits of one row chunk of the composition forward, at most.
COMPOSITION_CHUNK_BYTES = 48 << 20

#: The options each route's operators express beyond plain cross entropy.
_OPERATOR_OPTIONS = {
    "operators": ("ce_weight",),
    "composition+operators": _custom.CANN_EXPRESSES,
}


def why_not(forward_kind: str, backward_kind: str, call: LceCall) -> str | None:
    """Why the device route of these kinds cannot run `call`, or None."""
    if call.input.dtype == torch.float32:
        return "the operators take float16 or bfloat16, got float32"
    if backward_kind == "npu_custom":
        return _custom.why_not(call)
    kind = "operators" if forward_kind == "operators" else "composition+operators"
    beyond = [name for name in call.active_options() if name not in _OPERATOR_OPTIONS[kind]]
    if beyond:
        what = ("CANN's forward has no argmax" if beyond == ["return_token_accuracy"]
                else "CANN's aclnnFusedLinearCrossEntropyLossGrad cannot express them")
        return f"the options {', '.join(beyond)} are beyond its operators ({what})"
    return None


@dataclass
class Saved:
    x: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor | None
    class_weight: torch.Tensor | None
    target_mask: torch.Tensor
    masked_target: torch.Tensor
    stats: dict              # the global max and exp sum
    targets: _math.RowTargets
    options: LossOptions
    reduction: str
    backward_kind: str       # "operators" or "npu_custom"


def forward(forward_kind: str, backward_kind: str, call: LceCall):
    """((loss, z_loss, lse, token_accuracy), Saved)."""
    x, weight, rows, options = call.x, call.weight, call.rows, call.options
    start, group = call.vocab_start_index, call.process_group
    bt, vocab = x.size(0), weight.size(0)
    targets = _math.row_targets(rows, call.ignore_index, start, vocab, call.ce_weight, group)
    if forward_kind == "operators":
        shard_target = torch.where(targets.kept, rows, -1)
        m, s, p, target_mask, masked_target, _ = ops.fused_linear_online_max_sum(
            x, weight, shard_target, start, start + vocab, False)
        stats = _math.combine_statistics({"max": m, "sum": s, "predicted": p}, targets,
                                         slice(0, bt), start, group)
    else:
        stats = _composition_forward(call, targets)
        target_mask = ~targets.in_shard  # the bool form (SPEC §1)
        masked_target = torch.where(targets.in_shard, targets.columns, 0).to(rows.dtype)
    check_one_owner((stats["owners"] != 1) & targets.kept, rows, stats["owners"],
                    call.ignore_index)
    ce, z = _math.row_losses(stats, targets, options)
    outputs = _math.reduce_outputs(ce, z, stats, targets, options, call.reduction,
                                   call.target.shape)
    saved = Saved(x, weight, call.linear_bias, call.ce_weight, target_mask, masked_target,
                  {"max": stats["max"], "sum": stats["sum"]}, targets, options, call.reduction,
                  backward_kind)
    return outputs, saved


def backward(saved: Saved, grad_loss: torch.Tensor, wants):
    """(input_grad, weight_grad, bias_grad), None for what is not wanted."""
    want_x, want_w, _ = wants
    targets = saved.targets
    upstream = _math.upstream_rows(grad_loss, saved.reduction, saved.x.size(0))
    a, b = _math.upstream_scales(targets, saved.reduction)
    alpha, beta, gamma = _math.coefficients(saved.stats, targets, saved.options, a * upstream,
                                            b * upstream)
    if saved.backward_kind == "npu_custom":
        return _custom.backward(saved.x, saved.weight, saved.bias, saved.class_weight,
                                saved.target_mask, saved.masked_target, saved.stats,
                                saved.options, alpha, beta, gamma, wants)
    # alpha == beta and gamma == 0 on this route: G = alpha * (softmax - onehot)
    input_grad, weight_grad = ops.fused_linear_cross_entropy_loss_grad(
        alpha, saved.x, saved.weight, saved.target_mask, saved.masked_target, 0.0,
        saved.stats["max"], saved.stats["sum"], None)
    return (input_grad if want_x else None), (weight_grad if want_w else None), None


def _composition_forward(call: LceCall, targets: _math.RowTargets) -> dict:
    """Global row statistics from the chunked torch forward: each row chunk reduced to its
    local statistics, then one combine over all rows. The chunk count follows this shard's
    V, which may differ between ranks; the collectives, issued once per call, do not."""
    x, weight, options = call.x, call.weight, call.options
    bt, vocab = x.size(0), weight.size(0)
    step = max(1, min(max(bt, 1), COMPOSITION_CHUNK_BYTES // max(1, 4 * vocab)))
    w = call.ce_weight.float() if call.ce_weight is not None else None
    parts = []
    for r0 in range(0, bt, step):
        rs = slice(r0, min(bt, r0 + step))
        y, _ = transform_logits(fp32_logits(x[rs], weight), call.linear_bias, options)  # chunk x V
        rows_here = y.size(0)
        if vocab:
            m = y.amax(dim=1)
        else:
            m = y.new_full((rows_here,), -torch.inf)
        shifted = y - m[:, None]
        col = targets.columns[rs]
        hit = shifted.gather(1, col.clamp_min(0).unsqueeze(1)).squeeze(1) if vocab \
            else torch.zeros_like(m)
        local = {"max": m, "sum": torch.exp(shifted).sum(dim=1),
                 "predicted": torch.where(col >= 0, hit, 0.0)}
        if options.label_smoothing != 0.0:
            local["weighted"] = (shifted * w).sum(dim=1) if w is not None else shifted.sum(dim=1)
        if options.return_token_accuracy:
            local["argmax"] = y.argmax(dim=1) if vocab else torch.full_like(col, -1)
        parts.append(local)
    local = _math.concat_statistics(parts, x, options)
    return _math.combine_statistics(local, targets, slice(0, bt), call.vocab_start_index,
                                    call.process_group)
