"""SyncBatchNorm over torch.distributed that also trains on CPU (gloo).

It runs torch's own sync-BN steps, aten's operators, so on each device the kernels
registered there serve them (on CPU ours, ascend_ops._aten; on the NPU torch_npu's):

    forward:  batch_norm_stats → one all_gather of (mean, invstd, count) per rank →
              batch_norm_gather_stats_with_counts (also updates the running statistics) →
              batch_norm_elemt
    backward: batch_norm_backward_reduce → one all_reduce of (Σ dy, Σ dy·(x − mean)) →
              batch_norm_backward_elemt

On CPU the statistics travel in float64: each rank's mean and invstd before
batch_norm_stats rounds them, the counts, the global mean and invstd, the Σ dy sums (our
kernels take float64 statistics with any input dtype). Elsewhere the dtypes are torch's,
except on NPU tensors, where each step's tensors are handed over in dtypes its CANN op
admits (docs/npu.md, "SyncBatchNorm on NPU"): a bfloat16 input's statistics from a float32
copy (_batch_norm_stats), counts never narrower than float32, and the backward reduction
given the input centred and grad_output both in float32 (_backward_reduce: CANN's built-in
would cancel, and it takes gradOut and input in one dtype only).

The weight and bias gradients stay per-rank (data parallelism sums or averages them, as
with torch.nn.SyncBatchNorm). A rank with no rows takes part in both collectives with
zeros; when every rank is empty the output is empty, the weight and bias gradients are
zero and the running statistics are left alone (as nn.BatchNorm2d on the empty batch).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from ... import _aten
from ..._arguments import require_tensor
from ..._extension import native
from ...npu import adapter as _npu_adapter

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    """Drop-in for `torch.nn.SyncBatchNorm` (same constructor, behaviour and messages), for
    inputs [N, C, *] of at least 2 dims, on CPU as well. Unlike torch's, a single process
    (no process group, or a group of one) also runs the sync-BN kernels, which give what
    nn.BatchNorm*d gives."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 process_group: dist.ProcessGroup | None = None, device=None, dtype=None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device=device, dtype=dtype)
        self.process_group = process_group

    def _check_input_dim(self, input: torch.Tensor) -> None:
        require_tensor("SyncBatchNorm", "input", input)
        if input.dim() < 2:  # torch's checks and messages
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")
        if input.size(1) == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        # The running-average factor, exactly as torch's batch norm modules choose it.
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        running_mean = self.running_mean if not self.training or self.track_running_stats else None
        running_var = self.running_var if not self.training or self.track_running_stats else None
        if not (use_batch_stats and self.training):
            return nn.functional.batch_norm(input, running_mean, running_var, self.weight,
                                            self.bias, use_batch_stats, factor, self.eps)
        _check_npu_dtype(input)
        group = self._group()
        world = 1 if group is None else dist.get_world_size(group)
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean,
                                            running_var, self.eps, factor, group, world)

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


def _batch_norm_stats(input: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """aten's batch_norm_stats; on CPU, where our kernel serves it, its statistics before
    they are rounded to float32. Each rank's float32 mean at |mean| >> std (1e4 + N(0, 1):
    steps of 1e-3) put the gathered invstd 3e-5 off, 180x BatchNorm2d's error, and each
    float32 invstd costs the gathered variance 1e-7 of its value.

    On NPU tensors a bfloat16 input goes over in float32: torch_npu runs batch_norm_stats
    as aclnnBatchNormStats, whose phase 1 takes float32 and float16 only on Atlas A2/A3
    (bfloat16 only on RegBase SoCs, DAV_3510; hicann/ops-math v9.0.0
    math/reduce_std_with_mean/op_host/op_api/aclnn_batch_norm_stats.cpp:66-79, :84; its doc
    page says so too) and refuses bfloat16 with 161002. CANN casts every input to float32
    before reducing (:207), so the statistics are the same; the cost is a float32 copy of
    the input (4 bytes per element) for the call."""
    if input.device.type == "cpu" and _aten.serves("batch_norm_stats"):
        return native().batch_norm_stats_float64(input, eps)
    if input.device.type in _npu_adapter.NPU_DEVICE_TYPES and input.dtype == torch.bfloat16:
        input = input.float()
    return torch.batch_norm_stats(input, eps)


def _stats_dtype(input: torch.Tensor, mean: torch.Tensor | None) -> torch.dtype:
    """The dtype the per-rank statistics (`mean` from _batch_norm_stats, None on an empty
    rank) travel and combine in: float64 on CPU (our kernels take it, the counts stay
    exact past 2^24 rows, and the global mean and invstd are not rounded to float32
    before the element-wise steps use them); elsewhere what torch passes the device's
    kernels, batch_norm_stats' dtype."""
    if input.device.type == "cpu" or input.dtype == torch.float64:
        return torch.float64
    return torch.float32 if mean is None else mean.dtype


def _check_npu_dtype(input: torch.Tensor) -> None:
    """On NPU tensors torch_npu runs the sync-BN steps with CANN's kernels, which have no
    float64 (aclnnBatchNormReduceBackward: float32, float16, bfloat16 on Atlas A2/A3): say
    so before the first step, instead of CANN's 161002 from inside it."""
    if input.device.type in _npu_adapter.NPU_DEVICE_TYPES and input.dtype == torch.float64:
        raise TypeError("SyncBatchNorm: on NPU tensors 'input' must be torch.float32, "
                        "torch.float16 or torch.bfloat16 (CANN's batch-norm kernels have no "
                        "float64), got torch.float64")


def _counts_dtype(device_type: str, running_dtype: torch.dtype) -> torch.dtype:
    """The dtype the per-rank counts go to batch_norm_gather_stats_with_counts in, off CPU:
    running_mean's (torch's choice; CUDA's kernel reads them so), but on NPU tensors never
    narrower than float32: a float16 count is inf above 65504 rows (NaN statistics), and
    torch_npu 2.13's op_api kernel hands the counts to aclnnBatchNormGatherStatsWithCounts
    as they come (only its older acl_op kernel cast them to float32), whose phase 1 takes
    float32 / float16 / bfloat16 counts (aclnn_batch_norm_gather_stats_with_counts.cpp:
    96-107)."""
    if device_type in _npu_adapter.NPU_DEVICE_TYPES and torch.finfo(running_dtype).bits < 32:
        return torch.float32
    return running_dtype


def _backward_reduce(grad_output, input, mean, invstd, weight, input_g, weight_g, bias_g):
    """aten's batch_norm_backward_reduce. On NPU tensors, on the input centred first and
    with grad_output in the same dtype, float32:

    - CANN's built-in forms Σ dy·(x − mean) as Σ dy·x − mean·Σ dy in float32
      (aclnn_batch_norm_backward_reduce.cpp:375, :427), which cancels when |mean| >> std
      (1.2e-3 off at |mean| = 1000, 7x SPEC §4's bound; tests/test_cann_golden.py). Given
      x − mean (in float32) and a zero mean it sums dy·(x − mean) directly.
    - its phase 1 requires gradOut and input in one dtype (CheckDtypeValid,
      aclnn_batch_norm_backward_reduce.cpp:142-144, OP_CHECK_DTYPE_NOT_MATCH; 161002
      otherwise), so a float16 / bfloat16 grad_output goes over in float32 beside the
      float32 centred input. CANN casts both to float32 before summing (:298-301), so
      nothing is rounded that CANN would not round.

    The cost: one element-wise pass over the input and float32 copies of the input and,
    for a half layer, of grad_output (4 bytes per element each) held for the call; the
    sums come back in float32."""
    if input.device.type in _npu_adapter.NPU_DEVICE_TYPES:
        shape = [1] * input.dim()
        shape[1] = input.size(1)
        input = input.float() - mean.float().view(shape)  # [N, C, *] float32
        grad_output = grad_output.float()                 # [N, C, *] float32, input's dtype
        mean = torch.zeros_like(mean, dtype=torch.float32)
        invstd = invstd.float()
    return torch.batch_norm_backward_reduce(grad_output, input, mean, invstd, weight,
                                            input_g, weight_g, bias_g)


def _dense(t: torch.Tensor) -> torch.Tensor:
    """`t` if contiguous or channels_last(_3d), else a contiguous copy (as torch does)."""
    if (t.is_contiguous() or t.is_contiguous(memory_format=torch.channels_last)
            or t.is_contiguous(memory_format=torch.channels_last_3d)):
        return t
    return t.contiguous()


def _ranks_with_rows(combined: torch.Tensor, c: int, group: dist.ProcessGroup | None,
                     world: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every rank's (mean [C], invstd [C], count [1]) packed as `combined` [2C + 1],
    gathered over `group` (this rank's alone when None), as (mean_all, invstd_all) [ranks, C]
    and counts [ranks] of the ranks with rows."""
    if group is None:
        per_rank = combined[None]
    else:
        # all_gather (not all_gather_into_tensor, which gloo lacks): one collective.
        gathered = [torch.empty_like(combined) for _ in range(world)]
        dist.all_gather(gathered, combined, group=group)
        per_rank = torch.stack(gathered)  # [world, 2C + 1]
    # Drop the ranks with no rows, as torch does: a kernel may not skip a zero count (ours
    # does). One boolean index of the packed rows, one host sync (torch indexes mean,
    # invstd and counts apart: three). With every rank empty none is left, and the gather
    # leaves the running statistics alone.
    per_rank = per_rank[per_rank[:, -1] >= 1]  # [ranks with rows, 2C + 1]
    mean_all, invstd_all, count_all = per_rank.split(c, dim=1)
    return mean_all, invstd_all, count_all.view(-1)


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum, group, world):
        input = _dense(input)
        c = input.size(1)
        size = input.numel() // c
        if size == 1 and world < 2:  # torch's check and message
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")
        if input.numel() > 0:
            mean, invstd = _batch_norm_stats(input, eps)
            stats_dtype = _stats_dtype(input, mean)
            mean, invstd = mean.to(stats_dtype), invstd.to(stats_dtype)
            count = torch.full((1,), size, dtype=stats_dtype, device=mean.device)
            if group is None:  # one process with rows: nothing to gather or drop
                mean_all, invstd_all, counts = mean[None], invstd[None], count
            else:
                mean_all, invstd_all, counts = _ranks_with_rows(
                    torch.cat([mean, invstd, count]), c, group, world)
        else:
            # Zeros with count 0: this rank still joins the all_gather its peers wait on.
            zeros = torch.zeros(2 * c + 1, dtype=_stats_dtype(input, None), device=input.device)
            mean_all, invstd_all, counts = _ranks_with_rows(zeros, c, group, world)
        saved_counts = counts.to(torch.int32)  # before a narrower dtype below could round them
        if input.device.type != "cpu" and running_mean is not None:
            # Other devices' kernels read counts in running_mean's dtype (torch does this
            # too); ours take any dtype, and a half count is not exact above 2048.
            counts = counts.to(_counts_dtype(input.device.type, running_mean.dtype))
        mean, invstd = torch.batch_norm_gather_stats_with_counts(
            input, mean_all, invstd_all, running_mean, running_var, momentum, eps, counts)
        ctx.save_for_backward(input, weight, mean, invstd, saved_counts)
        ctx.group = group
        ctx.has_bias = bias is not None
        if input.numel() == 0:
            return torch.empty_like(input)
        return torch.batch_norm_elemt(input, weight, bias, mean, invstd, eps)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, mean, invstd, count = ctx.saved_tensors
        need_input, need_weight, need_bias = ctx.needs_input_grad[:3]
        grad_input = grad_weight = grad_bias = None
        c = input.size(1)
        if input.numel() > 0:
            grad_output = _dense(grad_output)
            sum_dy, sum_dy_xmu, grad_weight, grad_bias = _backward_reduce(
                grad_output, input, mean, invstd, weight, need_input,
                need_weight and weight is not None, need_bias and ctx.has_bias)
            if need_input:
                if ctx.group is not None:
                    # One all_reduce for both, in the statistics' dtype (float64 on CPU).
                    sums = torch.cat([sum_dy, sum_dy_xmu]).to(mean.dtype)
                    dist.all_reduce(sums, op=dist.ReduceOp.SUM, group=ctx.group)
                    sum_dy, sum_dy_xmu = sums.split(c)
                if weight is not None and weight.dtype != mean.dtype:
                    weight = weight.to(mean.dtype)
                grad_input = torch.batch_norm_backward_elemt(
                    grad_output, input, mean, invstd, weight, sum_dy, sum_dy_xmu, count)
        else:
            if need_input and ctx.group is not None:
                # Zeros: this rank still joins the all_reduce its peers wait on.
                dist.all_reduce(torch.zeros(2 * c, dtype=mean.dtype, device=mean.device),
                                op=dist.ReduceOp.SUM, group=ctx.group)
            if need_input:
                grad_input = torch.zeros_like(input)
            if weight is not None:  # no rows here: these rows' share of the gradients is 0
                grad_weight = torch.zeros_like(weight) if need_weight else None
                grad_bias = torch.zeros_like(weight) if need_bias and ctx.has_bias else None
        if weight is not None:
            grad_weight = None if grad_weight is None else grad_weight.to(weight.dtype)
            grad_bias = None if grad_bias is None else grad_bias.to(weight.dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
