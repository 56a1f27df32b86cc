"""linear_cross_entropy on CPU runs its GEMMs on the kept rows only.

A row whose target is `ignore_index` (padding, a masked prompt) adds nothing to the loss
nor to any gradient, yet costs 6·H·V multiply-adds in each of the step's three GEMMs:
a sixth of the step for a batch with one row in seven ignored, and most of it for
instruction tuning with masked prompts. On CPU the forward therefore gathers the kept
rows of input [BT, H] into [BT', H], runs the whole step on them, and scatters the per-row
loss and the input gradient back (zeros on ignored rows, as before).

Gathering reads [BT, H] and scattering writes it; that pays when the ignored rows' GEMM
work (∝ ignored·H·V) dwarfs this copy (∝ BT·H), so rows are gathered only when
ignored · V >= MIN_IGNORED_VOCAB_PER_ROW · BT (64: at V = 16000, 1 row in 250). Not on
an accelerator (knowing which rows to keep would read the targets on the host and stall
its stream) nor under torch.compile (the kept count is data-dependent).

With a process group every rank must run the same rows, as each chunk's statistics are
combined row by row with collectives: one all-reduce agrees on the decision, and where
the ranks' ignored counts differ (their targets are not the same, which the owner check
then reports) every row runs as before.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

MIN_IGNORED_VOCAB_PER_ROW = 64


def kept_row_index(ignored: torch.Tensor, vocab: int,
                   group: dist.ProcessGroup | None) -> torch.Tensor | None:
    """Indices [BT'] (int64, ascending) of the rows to run, given `ignored` [BT] bool; None
    to run every row."""
    if ignored.device.type != "cpu" or torch.compiler.is_compiling():
        return None
    bt = ignored.numel()
    dropped = int(ignored.sum())
    worth = 0 < dropped < bt and dropped * vocab >= MIN_IGNORED_VOCAB_PER_ROW * bt
    if group is not None:
        # [worth, dropped, -dropped] under MIN: every rank finds it worth and all drop as many
        plan = torch.tensor([int(worth), dropped, -dropped], dtype=torch.int64)
        dist.all_reduce(plan, op=dist.ReduceOp.MIN, group=group)
        worth = bool(plan[0]) and int(plan[1]) == -int(plan[2])
    return (~ignored).nonzero().squeeze(1) if worth else None


def gather(rows: torch.Tensor, index: torch.Tensor | None) -> torch.Tensor:
    """rows[index] along dim 0 (rows itself for None)."""
    return rows if index is None else rows.index_select(0, index)


def scatter(kept: torch.Tensor, index: torch.Tensor | None, total: int) -> torch.Tensor:
    """[total, ...] with kept's rows at `index` and zeros elsewhere (kept itself for None)."""
    if index is None:
        return kept
    full = kept.new_zeros((total, *kept.shape[1:]))
    return full.index_copy_(0, index, kept)
