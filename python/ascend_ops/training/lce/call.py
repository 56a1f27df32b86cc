"""One linear_cross_entropy call as one value: `LceCall`, built once by checks.make_call
(every argument checked, every default filled) and read by the route that runs it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.distributed as dist

__all__ = ["LceCall", "LossOptions", "LinearCrossEntropyOutput", "MEMORY_SAVING",
           "HIGH_PERFORMANCE", "MODES", "REDUCTIONS"]

MEMORY_SAVING = "memory-saving"
HIGH_PERFORMANCE = "high-performance"
MODES = (MEMORY_SAVING, HIGH_PERFORMANCE)
REDUCTIONS = ("mean", "sum", "none")


class LinearCrossEntropyOutput(NamedTuple):
    """What linear_cross_entropy returns when a `return_*` flag is set (None for what was
    not asked for). Only `loss` is differentiable."""

    loss: torch.Tensor
    z_loss: torch.Tensor | None = None
    lse: torch.Tensor | None = None
    token_accuracy: torch.Tensor | None = None


@dataclass(frozen=True)
class LossOptions:
    """The scalar loss options of a call (SPEC §7), checked; the option tensors
    (linear_bias, ce_weight) are the call's."""

    label_smoothing: float = 0.0
    logit_scale: float = 1.0
    softcap: float | None = None
    lse_square_scale: float = 0.0
    return_z_loss: bool = False
    return_lse: bool = False
    return_token_accuracy: bool = False

    @property
    def softcap_or_zero(self) -> float:
        """The soft-cap as the kernels take it: 0 for none (a cap is > 0)."""
        return 0.0 if self.softcap is None else self.softcap

    @property
    def returns_extra(self) -> bool:
        return self.return_z_loss or self.return_lse or self.return_token_accuracy

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


@dataclass(frozen=True)
class LceCall:
    """A checked call: `input` [*, H], `weight` [V, H] (this rank's vocabulary shard,
    global ids [vocab_start_index, vocab_start_index + V)), `target` [*]; the option
    tensors `linear_bias` and `ce_weight` [V] or None; `options`; and the rest with its
    default filled in (`vocab_start_index` is rank * V when not given)."""

    input: torch.Tensor
    weight: torch.Tensor
    target: torch.Tensor
    linear_bias: torch.Tensor | None
    ce_weight: torch.Tensor | None
    options: LossOptions
    ignore_index: int
    reduction: str
    process_group: dist.ProcessGroup | None
    vocab_start_index: int
    mode: str
    needs_grad: bool  # a gradient will be asked for (grad mode on, a tensor requiring it)

    @property
    def x(self) -> torch.Tensor:
        """input as rows: [BT, H] (a 2-D input as it is: torch.compile cannot save a view
        of an input for the backward)."""
        return self.input if self.input.dim() == 2 else self.input.reshape(-1, self.input.size(-1))

    @property
    def rows(self) -> torch.Tensor:
        """target as rows: [BT]."""
        return self.target.reshape(-1)

    @property
    def vocab(self) -> int:
        return self.weight.size(0)

    @property
    def has_bias(self) -> bool:
        return self.linear_bias is not None

    @property
    def has_class_weight(self) -> bool:
        return self.ce_weight is not None

    @property
    def plain(self) -> bool:
        """Plain cross entropy, nothing extra returned: what the SPEC §1/§3 operators
        compute."""
        return not self.options.returns_extra and not self.options.active(
            self.has_bias, self.has_class_weight)

    def active_options(self) -> list[str]:
        return self.options.active(self.has_bias, self.has_class_weight)
