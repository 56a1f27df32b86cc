"""linear_cross_entropy for a float32 head on CPU, in float32:

    loss = F.cross_entropy(input @ full_weight.T, target)      # fp32 products, fp32 loss

with the vocabulary split by rows over `process_group` as linear_cross_entropy splits it. The
fused kernels take float16 and bfloat16 only (so does CANN), so this path is plain torch:
the forward computes the logits a row chunk at a time and keeps only the row statistics;
the backward recomputes each chunk's logits and forms its gradient there. Memory is one
chunk's [rows, V] float32 logits (and their gradient) at a time, not [BT, V].
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .statistics import check_one_owner, combine_row_statistics

# float32 logits of one row chunk at most: 393 rows at V = 32000, 98 rows at V = 128256.
CHUNK_LOGITS_BYTES = 48 << 20


def chunk_rows(bt: int, vocab: int) -> int:
    return max(1, min(max(bt, 1), CHUNK_LOGITS_BYTES // max(1, 4 * vocab)))


def linear_cross_entropy_float32(
    input: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    process_group: dist.ProcessGroup | None = None,
    vocab_start_index: int | None = None,
) -> torch.Tensor:
    """The loss above for float32 `input` [*, H] and `weight` [V, H] on CPU; `target` [*]
    integer global ids, `ignore_index` rows contributing nothing; reduction "mean" (over
    the rows not ignored), "sum" or "none". Returns float32."""
    if input.dtype != torch.float32 or weight.dtype != torch.float32:
        raise TypeError(f"linear_cross_entropy_float32: 'input' and 'weight' must be "
                        f"torch.float32, got {input.dtype} and {weight.dtype}")
    if input.device.type != "cpu":
        raise ValueError(f"linear_cross_entropy_float32: runs on CPU tensors, got "
                         f"{input.device.type}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"linear_cross_entropy_float32: 'reduction' must be 'mean', 'sum' or "
                         f"'none', got {reduction!r}")
    if vocab_start_index is None:
        rank = 0 if process_group is None else dist.get_rank(process_group)
        vocab_start_index = rank * weight.size(0)
    row_loss = _Float32LinearCrossEntropy.apply(
        input.reshape(-1, input.size(-1)), weight, target.reshape(-1), ignore_index,
        process_group, vocab_start_index)
    if reduction == "mean":
        return row_loss.sum() / (target != ignore_index).sum()
    if reduction == "sum":
        return row_loss.sum()
    return row_loss.view(target.shape)


class _Float32LinearCrossEntropy(torch.autograd.Function):
    """Per-row losses [BT] (0 on ignored rows) of x [BT, H] against this shard w [V, H]."""

    @staticmethod
    def forward(ctx, x, w, rows, ignore_index, group, start):
        bt, vocab = x.size(0), w.size(0)
        ignored = rows == ignore_index
        in_shard = (rows >= start) & (rows < start + vocab) & ~ignored
        columns = torch.where(in_shard, rows - start, 0).long().unsqueeze(1)  # BT x 1
        local = []
        step = chunk_rows(bt, vocab)
        for r0 in range(0, bt, step):
            r1 = min(bt, r0 + step)
            logits = x[r0:r1] @ w.T  # chunk x V, float32
            row_max = logits.amax(dim=1) if vocab else logits.new_full((r1 - r0,), -torch.inf)
            sum_exp = torch.exp(logits - row_max[:, None]).sum(dim=1)
            # the target's logit relative to the local max (combine_row_statistics' convention)
            hit = logits.gather(1, columns[r0:r1]).squeeze(1) if vocab else sum_exp
            local.append((row_max, sum_exp, torch.where(in_shard[r0:r1], hit - row_max, 0.0)))
        row_max, sum_exp, predicted = (torch.cat(parts) for parts in zip(*local)) if local \
            else (x.new_empty(0),) * 3
        row_max, sum_exp, predicted, owners = combine_row_statistics(
            row_max, sum_exp, predicted, in_shard.float(), group)
        check_one_owner((owners != 1) & ~ignored, rows, owners, ignore_index)
        ctx.save_for_backward(x, w, columns, in_shard, ignored, row_max, sum_exp)
        return (torch.log(sum_exp) - predicted).masked_fill(ignored, 0.0)

    @staticmethod
    def backward(ctx, grad_rows):
        x, w, columns, in_shard, ignored, row_max, sum_exp = ctx.saved_tensors
        want_x, want_w = ctx.needs_input_grad[:2]
        grad_rows = grad_rows.masked_fill(ignored, 0.0)
        bt, vocab = x.size(0), w.size(0)
        grad_x = torch.zeros_like(x) if want_x else None
        grad_w = torch.zeros_like(w) if want_w else None
        step = chunk_rows(bt, vocab)
        for r0 in range(0, bt, step):
            r1 = min(bt, r0 + step)
            # d loss / d logits = softmax - onehot(target), times each row's upstream grad
            g = torch.exp(x[r0:r1] @ w.T - row_max[r0:r1, None]) / sum_exp[r0:r1, None]
            g.scatter_add_(1, columns[r0:r1], -in_shard[r0:r1, None].to(g.dtype))
            g.mul_(grad_rows[r0:r1, None])  # chunk x V
            if want_x:
                grad_x[r0:r1] = g @ w
            if want_w:
                grad_w.addmm_(g.T, x[r0:r1])
        return grad_x, grad_w, None, None, None, None
