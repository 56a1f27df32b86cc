"""linear_cross_entropy's loss options (SPEC §7): their checks and their math on row
statistics, shared by every route (training/routes.py); the CPU route's kernels are driven
by training/options_cpu.py, the accelerator's by training/options_device.py.

With the head's raw logits r = input @ W.T (W split by rows over the ranks):

    z = logit_scale * (r + linear_bias)            logits, scaled before anything else
    y = softcap * tanh(z / softcap)                (softcap None: y = z)
    lse = logsumexp(y)                             per row, over the whole vocabulary
    ce  = (1 - eps) * w[t] * (lse - y[t]) + eps / C * sum_c w[c] * (lse - y[c])
    z_loss = lse_square_scale * lse**2

with C the whole vocabulary, w the class weights `ce_weight` (1 without), eps
`label_smoothing`: torch's F.cross_entropy(y, t, weight=w, label_smoothing=eps) per row
(aten's cross_entropy_loss_label_smoothing), plus Liger-Kernel's z-loss. Rows whose target
is `ignore_index` count nowhere. Reductions: "none" gives ce + z_loss per row; "sum" sums
them; "mean" divides the ce sum by the summed w[t] of the kept rows (torch) and the z_loss
sum by their number (Liger). `return_z_loss` gives the z_loss part reduced the same way,
`return_lse` the per-row lse, `return_token_accuracy` the fraction of kept rows whose
target is the argmax of y over the whole vocabulary (per row for "none").

The gradient with respect to y of one kept row, for upstream scales a (ce) and b (z_loss),
is alpha * p - beta * onehot(t) - gamma * w with p = softmax(y) and

    alpha = a * ((1 - eps) * w[t] + eps * W / C) + 2 * lse_square_scale * b * lse
    beta  = a * (1 - eps) * w[t]
    gamma = a * eps / C                             (W = sum_c w[c])

which the kernels' one option stage (op_plugin/csrc/cpu/cross_entropy/logit_options.h)
turns into the gradient of r: times logit_scale and tanh's slope 1 - (y / softcap)**2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.distributed as dist

from .._arguments import require_bool, require_number, require_optional_tensor

__all__ = ["LossOptions", "LinearCrossEntropyOutput", "check_loss_options",
           "check_option_tensors"]

_OP = "linear_cross_entropy"


class LinearCrossEntropyOutput(NamedTuple):
    """What linear_cross_entropy returns when a `return_*` flag is set (None for what was
    not asked for). Only `loss` is differentiable."""

    loss: torch.Tensor
    z_loss: torch.Tensor | None = None
    lse: torch.Tensor | None = None
    token_accuracy: torch.Tensor | None = None


@dataclass(frozen=True)
class LossOptions:
    """The scalar options of one call (the tensors, linear_bias and ce_weight, travel
    beside them)."""

    label_smoothing: float = 0.0
    logit_scale: float = 1.0
    softcap: float | None = None
    lse_square_scale: float = 0.0
    return_z_loss: bool = False
    return_lse: bool = False
    return_token_accuracy: bool = False

    @property
    def returns_extra(self) -> bool:
        return self.return_z_loss or self.return_lse or self.return_token_accuracy

    def transforms_logits(self, has_bias: bool) -> bool:
        """Whether y differs from the raw logits (bias, scale, soft-cap)."""
        return has_bias or self.logit_scale != 1.0 or self.softcap is not None

    def plain(self, has_bias: bool, has_class_weight: bool) -> bool:
        """Whether this is plain cross entropy, which the SPEC §1/§3 operators compute."""
        return not (self.transforms_logits(has_bias) or has_class_weight
                    or self.label_smoothing != 0.0 or self.lse_square_scale != 0.0
                    or self.return_token_accuracy)

    def active(self, has_bias: bool, has_class_weight: bool) -> list[str]:
        """The names of the options set to something other than their neutral value."""
        names = []
        if has_bias:
            names.append("linear_bias")
        if has_class_weight:
            names.append("ce_weight")
        if self.label_smoothing != 0.0:
            names.append("label_smoothing")
        if self.logit_scale != 1.0:
            names.append("logit_scale")
        if self.softcap is not None:
            names.append("softcap")
        if self.lse_square_scale != 0.0:
            names.append("lse_square_scale")
        if self.return_token_accuracy:
            names.append("return_token_accuracy")
        return names


def check_loss_options(label_smoothing, logit_scale, softcap, lse_square_scale,
                       return_z_loss, return_lse, return_token_accuracy) -> LossOptions:
    """The scalar options, checked (TypeError for a wrong kind, ValueError for a value
    outside its range); returns them as LossOptions with floats."""
    require_number(_OP, "label_smoothing", label_smoothing)
    require_number(_OP, "logit_scale", logit_scale)
    require_number(_OP, "lse_square_scale", lse_square_scale)
    if softcap is not None:
        require_number(_OP, "softcap", softcap)
    for name, flag in (("return_z_loss", return_z_loss), ("return_lse", return_lse),
                       ("return_token_accuracy", return_token_accuracy)):
        require_bool(_OP, name, flag)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{_OP}: 'label_smoothing' must lie in [0, 1], got {label_smoothing}")
    if not (math.isfinite(logit_scale) and logit_scale > 0.0):
        raise ValueError(f"{_OP}: 'logit_scale' must be a finite number > 0, got {logit_scale}")
    if softcap is not None and not (math.isfinite(softcap) and softcap > 0.0):
        raise ValueError(f"{_OP}: 'softcap' must be a finite number > 0 (or None for no "
                         f"soft-capping), got {softcap}")
    if not (math.isfinite(lse_square_scale) and lse_square_scale >= 0.0):
        raise ValueError(f"{_OP}: 'lse_square_scale' must be a finite number >= 0, got "
                         f"{lse_square_scale}")
    return LossOptions(float(label_smoothing), float(logit_scale),
                       None if softcap is None else float(softcap), float(lse_square_scale),
                       return_z_loss, return_lse, return_token_accuracy)


def check_option_tensors(input: torch.Tensor, weight: torch.Tensor, linear_bias, ce_weight) -> None:
    """linear_bias [V] in input's dtype; ce_weight [V] floating; both on input's device."""
    require_optional_tensor(_OP, "linear_bias", linear_bias)
    require_optional_tensor(_OP, "ce_weight", ce_weight)
    vocab = weight.size(0) if weight.dim() == 2 else None
    if linear_bias is not None:
        if linear_bias.dtype != input.dtype:
            raise TypeError(f"{_OP}: 'linear_bias' must have the dtype of 'input' "
                            f"({input.dtype}), got {linear_bias.dtype}")
        if tuple(linear_bias.shape) != (vocab,):
            raise ValueError(f"{_OP}: 'linear_bias' must be [V] = [{vocab}] (this shard's "
                             f"classes), got shape {list(linear_bias.shape)}")
    if ce_weight is not None:
        if ce_weight.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            raise TypeError(f"{_OP}: 'ce_weight' must be a floating dtype (float16, bfloat16, "
                            f"float32 or float64), got {ce_weight.dtype}")
        if tuple(ce_weight.shape) != (vocab,):
            raise ValueError(f"{_OP}: 'ce_weight' must be [V] = [{vocab}] (this shard's "
                             f"classes), got shape {list(ce_weight.shape)}")
    for name, t in (("linear_bias", linear_bias), ("ce_weight", ce_weight)):
        if t is not None and t.device != input.device:
            raise ValueError(f"{_OP}: '{name}' must be on the device of 'input' "
                             f"({input.device}), got {t.device}")


# ---------------------------------------------------------------------------------------
# The math on row statistics, shared by every path (the CPU kernels, the NPU composition).


@dataclass
class RowTargets:
    """Each row's target as the statistics need it. All [BT]."""

    kept: torch.Tensor        # bool: target != ignore_index
    in_shard: torch.Tensor    # bool: kept and held by this shard
    columns: torch.Tensor     # int64: the target's column in this shard, or -1
    ids: torch.Tensor         # int64: the global target id
    target_weight: torch.Tensor | None   # float32 w[t] on kept rows (0 elsewhere), global
    classes: torch.Tensor     # float64 scalar: C, the whole vocabulary
    weight_total: torch.Tensor  # float64 scalar: W = sum_c w[c] (C without weights)
    shard_weight_total: torch.Tensor  # float32 scalar: this shard's part of W
    count: torch.Tensor       # float32 scalar: kept rows
    weight_sum: torch.Tensor  # float32 scalar: sum of w[t] over kept rows (count without)


def row_targets(rows: torch.Tensor, ignore_index: int, start: int, vocab: int,
                class_weight: torch.Tensor | None, group) -> RowTargets:
    """The targets of `rows` [BT] for the shard [start, start + vocab), with the global
    class totals: one all-reduce under a process group ([w[t] per row, C, W])."""
    kept = rows != ignore_index
    ids = rows.long()
    in_shard = kept & (ids >= start) & (ids < start + vocab)
    columns = torch.where(in_shard, ids - start, -1)
    device = rows.device
    shard_total = (class_weight.float().sum() if class_weight is not None
                   else torch.tensor(float(vocab), device=device))
    local_w = None
    if class_weight is not None:
        local_w = torch.where(in_shard, class_weight.float()[columns.clamp_min(0)], 0.0)
    parts = [torch.tensor([float(vocab)], dtype=torch.float64, device=device),
             shard_total.double().reshape(1)]
    if local_w is not None:
        parts.append(local_w.double())
    totals = torch.cat(parts)
    if group is not None:
        dist.all_reduce(totals, op=dist.ReduceOp.SUM, group=group)
    target_weight = totals[2:].float() if class_weight is not None else None
    count = kept.sum().float()
    weight_sum = target_weight.sum() if target_weight is not None else count
    return RowTargets(kept, in_shard, columns, ids, target_weight, totals[0], totals[1],
                      shard_total.float(), count, weight_sum)


def combine_statistics(stats: dict, targets: RowTargets, rows: slice, start: int, group):
    """One chunk's local row statistics → global ones (SPEC §3, §7): a max all-reduce of
    the row maxima, one sum all-reduce of [S·e^(m−M), predicted, owned, weighted sum], and
    with token accuracy one min all-reduce of the argmax ids. `stats` holds "max", "sum",
    "predicted" (y_t − m), "weighted" (Σ w (y − m)) and "argmax" (local column or −1);
    returns the same keys made global plus "owners"."""
    owned = targets.in_shard[rows].float()
    m = stats["max"]
    candidates = torch.where(stats["argmax"] >= 0, stats["argmax"] + start,
                             torch.iinfo(torch.int64).max) if "argmax" in stats else None
    if group is None:
        out = dict(stats, owners=owned)
        if candidates is not None:
            out["argmax"] = torch.where(stats["argmax"] >= 0, candidates, -1)
        return out
    big_m = m.clone()
    dist.all_reduce(big_m, op=dist.ReduceOp.MAX, group=group)
    shift = m - big_m  # <= 0; -inf for an empty shard
    sums = [stats["sum"] * torch.exp(shift),
            stats["predicted"] + torch.where(owned > 0, shift, 0.0),
            owned]
    if "weighted" in stats:
        total = targets.shard_weight_total
        sums.append(torch.where(total != 0, stats["weighted"] + shift * total, 0.0))
    stacked = torch.stack(sums)
    dist.all_reduce(stacked, op=dist.ReduceOp.SUM, group=group)
    out = {"max": big_m, "sum": stacked[0], "predicted": stacked[1], "owners": stacked[2]}
    if "weighted" in stats:
        out["weighted"] = stacked[3]
    if candidates is not None:
        # the first argmax of the whole row: the smallest id among the shards holding M
        mine = torch.where(shift == 0, candidates, torch.iinfo(torch.int64).max)
        dist.all_reduce(mine, op=dist.ReduceOp.MIN, group=group)
        out["argmax"] = torch.where(mine == torch.iinfo(torch.int64).max, -1, mine)
    return out


def lse_of(stats: dict) -> torch.Tensor:
    return stats["max"] + torch.log(stats["sum"])


def row_losses(stats: dict, targets: RowTargets, options: LossOptions):
    """(ce [BT], z_loss [BT]) float32 per row from global statistics, 0 on ignored rows."""
    eps = options.label_smoothing
    log_s = torch.log(stats["sum"].double())
    nll = log_s - stats["predicted"].double()  # lse - y_t
    w_t = targets.target_weight.double() if targets.target_weight is not None else 1.0
    ce = (1.0 - eps) * w_t * nll if eps != 1.0 else torch.zeros_like(nll)
    if eps != 0.0:
        # sum_c w_c (lse - y_c) = W (lse - M) - sum_c w_c (y_c - M)
        smooth = targets.weight_total * log_s - stats["weighted"].double()
        ce = ce + (eps / targets.classes) * smooth
    ce = torch.where(targets.kept, ce, 0.0).float()
    if options.lse_square_scale != 0.0:
        lse = lse_of(stats).double()
        z = torch.where(targets.kept, options.lse_square_scale * lse * lse, 0.0).float()
    else:
        z = torch.zeros_like(ce)
    return ce, z


def upstream_scales(targets: RowTargets, reduction: str):
    """(a, b): the unit upstream gradient of each row's ce and z_loss parts for a
    loss.backward() of the reduced loss; 0 on ignored rows (mean: 1 / Σ w[t] and 1 / count)."""
    one = torch.ones_like(targets.count)
    if reduction == "mean":
        a, b = 1.0 / targets.weight_sum, 1.0 / targets.count
    else:
        a, b = one, one
    zero = torch.zeros((), device=targets.kept.device)
    return torch.where(targets.kept, a, zero), torch.where(targets.kept, b, zero)


def coefficients(stats: dict, targets: RowTargets, options: LossOptions, a: torch.Tensor,
                 b: torch.Tensor):
    """(alpha, beta, gamma) float32 [BT] of the gradient (the module docstring), for the
    per-row upstream scales a (ce) and b (z_loss); 0 on ignored rows."""
    eps = options.label_smoothing
    w_t = targets.target_weight if targets.target_weight is not None else torch.ones_like(a)
    beta = a * (1.0 - eps) * w_t
    alpha = beta
    if eps != 0.0:
        alpha = alpha + a * float(eps) * (targets.weight_total / targets.classes).float()
    if options.lse_square_scale != 0.0:
        lse = torch.where(targets.kept, lse_of(stats), 0.0)
        alpha = alpha + 2.0 * options.lse_square_scale * b * lse
    gamma = a * (eps / targets.classes).float() if eps != 0.0 else torch.zeros_like(a)
    zero = torch.zeros((), device=a.device)
    return tuple(torch.where(targets.kept, c, zero).float().contiguous()
                 for c in (alpha, beta, gamma))


def reduce_outputs(ce, z, stats, targets: RowTargets, options: LossOptions, reduction: str,
                   shape):
    """(loss, z_loss | None, lse | None, token_accuracy | None) from the per-row parts."""
    if reduction == "mean":
        loss = ce.sum() / targets.weight_sum
        if options.lse_square_scale != 0.0:
            loss = loss + z.sum() / targets.count
        z_loss = z.sum() / targets.count
    elif reduction == "sum":
        loss = ce.sum() + z.sum()
        z_loss = z.sum()
    else:
        loss = (ce + z).view(shape)
        z_loss = z.view(shape)
    lse = lse_of(stats).view(shape) if options.return_lse else None
    accuracy = None
    if options.return_token_accuracy:
        correct = ((stats["argmax"] == targets.ids) & targets.kept).float()
        accuracy = correct.view(shape) if reduction == "none" else correct.sum() / targets.count
    return loss, (z_loss if options.return_z_loss else None), lse, accuracy
