"""Module form of ascend_ops.linear_cross_entropy."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ..lce import MEMORY_SAVING, linear_cross_entropy
from ..lce.checks import check_loss_options, check_options

__all__ = ["LinearCrossEntropyLoss"]


class LinearCrossEntropyLoss(nn.Module):
    """`loss(input, weight, target, linear_bias=None)` = `ascend_ops.linear_cross_entropy`
    with the options fixed at construction (the LM head's weight shard, and bias, stay with
    the model; `ce_weight`, this shard's class weights, is a buffer of the module)."""

    def __init__(self, *, ignore_index: int = -100, reduction: str = "mean",
                 process_group: dist.ProcessGroup | None = None,
                 vocab_start_index: int | None = None, mode: str = MEMORY_SAVING,
                 ce_weight: torch.Tensor | None = None, label_smoothing: float = 0.0,
                 logit_scale: float = 1.0, softcap: float | None = None,
                 lse_square_scale: float = 0.0, return_z_loss: bool = False,
                 return_lse: bool = False, return_token_accuracy: bool = False) -> None:
        super().__init__()
        # fail here, not at the first step
        check_options(ignore_index, reduction, process_group, vocab_start_index, mode)
        self.options = check_loss_options(label_smoothing, logit_scale, softcap,
                                          lse_square_scale, return_z_loss, return_lse,
                                          return_token_accuracy)
        self.ignore_index, self.reduction, self.mode = ignore_index, reduction, mode
        self.process_group, self.vocab_start_index = process_group, vocab_start_index
        self.register_buffer("ce_weight", ce_weight)

    def forward(self, input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                linear_bias: torch.Tensor | None = None):
        o = self.options
        return linear_cross_entropy(
            input, weight, target, linear_bias=linear_bias, ce_weight=self.ce_weight,
            ignore_index=self.ignore_index, reduction=self.reduction,
            label_smoothing=o.label_smoothing, logit_scale=o.logit_scale, softcap=o.softcap,
            lse_square_scale=o.lse_square_scale, return_z_loss=o.return_z_loss,
            return_lse=o.return_lse, return_token_accuracy=o.return_token_accuracy,
            process_group=self.process_group, vocab_start_index=self.vocab_start_index,
            mode=self.mode)

    def extra_repr(self) -> str:
        extra = ", ".join(f"{k}={v!r}" for k, v in (
            ("label_smoothing", self.options.label_smoothing), ("softcap", self.options.softcap),
            ("logit_scale", self.options.logit_scale),
            ("lse_square_scale", self.options.lse_square_scale))
            if v not in (0.0, None, 1.0))
        return (f"mode={self.mode!r}, reduction={self.reduction!r}, ignore_index={self.ignore_index}"
                + (f", {extra}" if extra else ""))
