"""Small autograd helpers for tensor-parallel layers built on torch.distributed."""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["all_reduce_grad"]


def all_reduce_grad(input: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    """Identity forward; the backward sums the gradient over `group`.

    Put it in front of a vocab-parallel LM head: every rank computes only its shard's part
    of the input gradient, and the layers below need the sum. `group=None` is the identity.
    """
    if group is None:
        return input
    return _AllReduceGrad.apply(input, group)


class _AllReduceGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, group):
        ctx.group = group
        return input.view_as(input)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM, group=ctx.group)
        return grad, None
