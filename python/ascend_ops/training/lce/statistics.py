"""Row statistics across the shards of a process group, for the plain route and the float32
path: the global max, exp sum and target logit from each shard's (SPEC §3), and the check
that each kept row's target is held by exactly one shard."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

__all__ = ["combine_row_statistics", "check_one_owner"]


def combine_row_statistics(logits_max, sum_exp_logits, predicted_logits, owned, group):
    """Local row statistics of each shard → global ones (SPEC §3), in two all-reduces:

        M = max_r m_r
        S = Σ_r s_r · exp(m_r − M)
        P = Σ_r p_r + (m_r − M)·owned_r         (p_r is relative to the local max m_r)

    `owned` (float, 1 where this shard holds the row's target) rides in the same sum, so
    the caller learns how many shards hold each target for free.
    """
    if group is None:
        return logits_max, sum_exp_logits, predicted_logits, owned
    global_max = logits_max.clone()
    dist.all_reduce(global_max, op=dist.ReduceOp.MAX, group=group)
    shift = logits_max - global_max  # <= 0; -inf for an empty shard
    stacked = torch.stack([
        sum_exp_logits * torch.exp(shift),
        predicted_logits + torch.where(owned > 0, shift, 0.0),
        owned,
    ])
    dist.all_reduce(stacked, op=dist.ReduceOp.SUM, group=group)
    return global_max, stacked[0], stacked[1], stacked[2]


def check_one_owner(bad: torch.Tensor, rows: torch.Tensor, owners: torch.Tensor,
                    ignore_index: int) -> None:
    """Every row not ignored must have its target in exactly one shard (`bad` marks those
    that do not). On CPU a ValueError names the first such row. On an accelerator reading
    `bad` would stall the host, so (as the NPU adapter's target check, SPEC §1) it is an
    asynchronous device-side assert where the backend registers one, a host check only
    under ASCEND_OPS_NPU_CHECK_TARGETS=1, and otherwise skipped; in a torch.compile'd
    graph the asynchronous assert where the device has a kernel for it (torch_npu 2.13
    registers none: a graph holding it would fail to run there), else nothing."""
    if torch.compiler.is_compiling():  # a traced graph cannot read `bad` on the host
        if _has_device_assert(bad.device):
            torch._assert_async(~bad.any(), "linear_cross_entropy: a 'target' is held by no "
                                "shard or by several (run uncompiled to see the row)")
        return
    on_host = bad.device.type == "cpu" or os.environ.get("ASCEND_OPS_NPU_CHECK_TARGETS") == "1"
    if not on_host:
        if _has_device_assert(bad.device):
            torch._assert_async(~bad.any(), "linear_cross_entropy: a 'target' is held by no "
                                "shard or by several (ASCEND_OPS_NPU_CHECK_TARGETS=1 names the row)")
        return
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"linear_cross_entropy: 'target' must be a vocabulary id held by exactly one "
            f"shard (or ignore_index={ignore_index}), got target[{row}] = {int(rows[row])} "
            f"held by {int(owners[row])} shards")


def _has_device_assert(device: torch.device) -> bool:
    """Whether `device`'s backend has a kernel for aten::_assert_async.msg."""
    return _backend_has_assert({"cpu": "CPU", "cuda": "CUDA"}.get(device.type, "PrivateUse1"))


@torch._dynamo.assume_constant_result  # a fact of the process: torch.compile reads it once
def _backend_has_assert(dispatch_key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key("aten::_assert_async.msg", dispatch_key)
