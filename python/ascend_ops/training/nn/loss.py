"""Module form of ascend_ops.linear_cross_entropy."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ..checks import check_options
from ..vocab_parallel import _MODES, _REDUCTIONS, MEMORY_SAVING, linear_cross_entropy

__all__ = ["LinearCrossEntropyLoss"]


class LinearCrossEntropyLoss(nn.Module):
    """`loss(input, weight, target)` = `ascend_ops.linear_cross_entropy` with the options
    fixed at construction (the LM head's weight shard stays with the model)."""

    def __init__(self, *, ignore_index: int = -100, reduction: str = "mean",
                 process_group: dist.ProcessGroup | None = None,
                 vocab_start_index: int | None = None, mode: str = MEMORY_SAVING) -> None:
        super().__init__()
        check_options(ignore_index, reduction, process_group, vocab_start_index, mode,
                      modes=_MODES, reductions=_REDUCTIONS)  # fail here, not at the first step
        self.ignore_index, self.reduction, self.mode = ignore_index, reduction, mode
        self.process_group, self.vocab_start_index = process_group, vocab_start_index

    def forward(self, input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return linear_cross_entropy(input, weight, target, ignore_index=self.ignore_index,
                                    reduction=self.reduction, process_group=self.process_group,
                                    vocab_start_index=self.vocab_start_index, mode=self.mode)

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}, reduction={self.reduction!r}, ignore_index={self.ignore_index}"
