"""SyncBatchNorm over torch.distributed that also runs on CPU (gloo).

Forward: each rank's per-channel count, mean and M2 (Σ (x − mean)²) are all-gathered in
one collective and merged exactly (Chan et al.'s parallel variance), so uneven batches and
ranks with zero rows need no special case. Backward: batch_norm_reduce_backward gives each
rank's Σ dy and Σ dy·(x − mean); one all-reduce sums them; the element-wise part is

    dx = (dy − Σdy/N − (x − mean)·invstd²·Σdy(x−mean)/N) · invstd · weight

The weight and bias gradients stay per-rank (data parallelism sums or averages them, as
with torch.nn.SyncBatchNorm).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from .. import ops

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    """Drop-in for `torch.nn.SyncBatchNorm` (same constructor and behaviour), for inputs
    of 2 to 5 dims [N, C, *], on CPU as well."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 process_group: dist.ProcessGroup | None = None, device=None, dtype=None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device=device, dtype=dtype)
        self.process_group = process_group

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if not 2 <= input.dim() <= 5:
            raise ValueError(f"SyncBatchNorm: 'input' must have 2 to 5 dims [N, C, *], got "
                             f"{input.dim()}D of shape {tuple(input.shape)}")
        if input.size(1) != self.num_features:
            raise ValueError(f"SyncBatchNorm: 'input' must have num_features = "
                             f"{self.num_features} channels in dim 1, got shape {tuple(input.shape)}")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        # The running-average factor, exactly as torch's batch norm modules choose it.
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        if not use_batch_stats:
            return nn.functional.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                            self.bias, False, 0.0, self.eps)
        running_mean = self.running_mean if not self.training or self.track_running_stats else None
        running_var = self.running_var if not self.training or self.track_running_stats else None
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean,
                                            running_var, self.eps, factor,
                                            self._group() if self.training else None)

    def _group(self) -> dist.ProcessGroup | None:
        """The group to synchronise over, or None for a single process."""
        if not (dist.is_available() and dist.is_initialized()):
            return None
        group = self.process_group or dist.group.WORLD
        return group if dist.get_world_size(group) > 1 else None

    @classmethod
    def convert_sync_batchnorm(cls, module: nn.Module,
                               process_group: dist.ProcessGroup | None = None) -> nn.Module:
        """Replace every batch norm layer under `module` by this SyncBatchNorm, keeping its
        parameters, running statistics and mode (the same contract as torch's)."""
        converted = module
        if isinstance(module, _BatchNorm) and not isinstance(module, cls):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group)
            if module.affine:
                with torch.no_grad():
                    converted.weight = module.weight
                    converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
            if hasattr(module, "qconfig"):
                converted.qconfig = module.qconfig
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return converted


def _gather_statistics(input: torch.Tensor, group) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Global per-channel (mean, biased var) in float64 and the global count per channel."""
    c = input.size(1)
    dims = [d for d in range(input.dim()) if d != 1]
    count = input.numel() // c if c else 0
    x = input.double()
    mean = x.mean(dims) if count else x.new_zeros(c)
    m2 = ((x - mean.view([1, c] + [1] * (input.dim() - 2))) ** 2).sum(dims) if count \
        else x.new_zeros(c)
    local = torch.cat([mean.new_tensor([count]), mean, m2])  # [1 + 2C]
    if group is None:
        per_rank = local[None]
    else:
        # all_gather (not all_gather_into_tensor, which gloo lacks): one collective.
        gathered = [torch.empty_like(local) for _ in range(dist.get_world_size(group))]
        dist.all_gather(gathered, local, group=group)
        per_rank = torch.stack(gathered)
    counts, means, m2s = per_rank[:, :1], per_rank[:, 1:1 + c], per_rank[:, 1 + c:]
    total = counts.sum()
    if total <= 1:
        raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel when "
                         f"training, got {int(total)} over all ranks (input shape "
                         f"{tuple(input.shape)} on this rank)")
    global_mean = (counts * means).sum(0) / total
    global_m2 = (m2s + counts * (means - global_mean) ** 2).sum(0)
    return global_mean, global_m2 / total, int(total)


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, factor, group):
        mean64, var64, total = _gather_statistics(input, group)
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - factor).add_(mean64.to(running_mean.dtype), alpha=factor)
                unbiased = var64 * total / (total - 1)
                running_var.mul_(1 - factor).add_(unbiased.to(running_var.dtype), alpha=factor)
        mean, invstd = mean64.float(), (var64 + eps).rsqrt().float()
        shape = [1, input.size(1)] + [1] * (input.dim() - 2)
        scale = invstd if weight is None else invstd * weight.float()
        shift = -mean * scale if bias is None else bias.float() - mean * scale
        output = (input.float() * scale.view(shape) + shift.view(shape)).to(input.dtype)
        ctx.save_for_backward(input, weight, mean, invstd)
        ctx.group, ctx.total = group, total
        ctx.has_bias = bias is not None
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, mean, invstd = ctx.saved_tensors
        need_input, need_weight, need_bias = ctx.needs_input_grad[:3]
        sum_dy, sum_dy_xmu, grad_weight, grad_bias = ops.batch_norm_reduce_backward(
            grad_output.contiguous(), input, mean, invstd, weight, need_input,
            need_weight and weight is not None, need_bias and ctx.has_bias)
        grad_input = None
        if need_input:
            if ctx.group is not None:
                sums = torch.cat([sum_dy, sum_dy_xmu])  # one all-reduce for both
                dist.all_reduce(sums, op=dist.ReduceOp.SUM, group=ctx.group)
                sum_dy, sum_dy_xmu = sums.chunk(2)
            c = input.size(1)
            shape = [1, c] + [1] * (input.dim() - 2)
            scale = invstd if weight is None else invstd * weight.float()
            mean_dy = (sum_dy / ctx.total).view(shape)
            mean_dy_xmu = (sum_dy_xmu / ctx.total * invstd * invstd).view(shape)
            grad_input = ((grad_output.float() - mean_dy - (input.float() - mean.view(shape))
                           * mean_dy_xmu) * scale.view(shape)).to(input.dtype)
        if grad_weight is not None:
            grad_weight = grad_weight.to(weight.dtype)
        if grad_bias is not None:
            grad_bias = grad_bias.to(weight.dtype if weight is not None else grad_bias.dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None
