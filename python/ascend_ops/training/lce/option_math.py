"""linear_cross_entropy's loss options (SPEC §7) as math on row statistics, shared by every
route that takes them (the CPU kernels' route and the device routes).

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

which the logit transform turns into the gradient of r: times logit_scale and tanh's slope
1 - (y / softcap)**2 (logits.py on the device routes; on CPU the kernels' one option
stage, op_plugin/csrc/cpu/cross_entropy/logit_options.h).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from .call import LossOptions

__all__ = ["RowTargets", "row_targets", "combine_statistics", "concat_statistics",
           "upstream_rows", "lse_of", "row_losses", "upstream_scales", "coefficients",
           "reduce_outputs"]


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

    def rows(self, rs: slice) -> "RowTargets":
        """The targets of the rows `rs` (the totals are the whole call's)."""
        tw = self.target_weight[rs] if self.target_weight is not None else None
        return RowTargets(self.kept[rs], self.in_shard[rs], self.columns[rs], self.ids[rs], tw,
                          self.classes, self.weight_total, self.shard_weight_total,
                          self.count, self.weight_sum)


def row_targets(rows: torch.Tensor, ignore_index: int, start: int, vocab: int,
                class_weight: torch.Tensor | None, group) -> RowTargets:
    """The targets of `rows` [BT] for the shard [start, start + vocab), with the global
    class totals. Under a process group: one int64 all-reduce of the shard sizes (C), and
    with class weights one float32 all-reduce of [each rank's W_r in its own slot, w[t] per
    row]. Every sum there has one non-zero term per element (a slot is one rank's; a row's
    target one shard's), so float32 carries them exactly; W = sum_r W_r is then summed in
    float64 on every rank, as exact as a float64 collective would make it. HCCL on an Atlas
    A2 has no float64 collective (torch_npu's ProcessGroupHCCL, checkSupportedDataType), and
    no value is made on the host: nothing waits for the device."""
    kept = rows != ignore_index
    ids = rows.long()
    in_shard = kept & (ids >= start) & (ids < start + vocab)
    columns = torch.where(in_shard, ids - start, -1)
    device = rows.device
    if class_weight is not None:
        shard_total = class_weight.float().sum()
        local_w = torch.where(in_shard, class_weight.float()[columns.clamp_min(0)], 0.0)
    else:  # a fill on the device, not a copy from the host
        shard_total = torch.full((), float(vocab), dtype=torch.float32, device=device)
        local_w = None
    classes = torch.full((), vocab, dtype=torch.int64, device=device)
    target_weight, shard_totals = local_w, shard_total.reshape(1)
    if group is not None:
        dist.all_reduce(classes, op=dist.ReduceOp.SUM, group=group)
        if class_weight is not None:
            slots = torch.zeros(dist.get_world_size(group), dtype=torch.float32, device=device)
            slots[dist.get_rank(group)] = shard_total
            packed = torch.cat([slots, local_w])  # [world + BT]
            dist.all_reduce(packed, op=dist.ReduceOp.SUM, group=group)
            shard_totals, target_weight = packed[:slots.numel()], packed[slots.numel():]
    classes = classes.double()
    weight_total = shard_totals.double().sum() if class_weight is not None else classes
    count = kept.sum().float()
    weight_sum = target_weight.sum() if target_weight is not None else count
    return RowTargets(kept, in_shard, columns, ids, target_weight, classes, weight_total,
                      shard_total.float(), count, weight_sum)


def combine_statistics(stats: dict, targets: RowTargets, rows: slice, start: int, group):
    """The local row statistics of the rows `rows` → global ones (SPEC §3, §7): a max
    all-reduce of the row maxima, one sum all-reduce of [S·e^(m−M), predicted, owned, weighted sum], and
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


def concat_statistics(parts: list[dict], x: torch.Tensor, options: LossOptions) -> dict:
    """The row chunks' statistics as one dict of [BT] tensors (with no rows, the keys the
    options ask for, empty)."""
    if not parts:
        empty = x.new_empty(0, dtype=torch.float32)
        out = {"max": empty, "sum": empty, "predicted": empty}
        if options.label_smoothing != 0.0:
            out["weighted"] = empty
        if options.return_token_accuracy:
            out["argmax"] = x.new_empty(0, dtype=torch.int64)
        return out
    return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}


def upstream_rows(grad_loss: torch.Tensor, reduction: str, bt: int) -> torch.Tensor:
    """The upstream gradient of the reduced loss as one float32 value per row [BT]."""
    if reduction == "none":
        return grad_loss.reshape(-1).float()
    return grad_loss.float().reshape(1).expand(bt)


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
