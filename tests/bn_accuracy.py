"""Sync-BN accuracy against float64 truth, with nn.BatchNorm2d's own error in the same
dtype as the yardstick: the problems, the truth, BatchNorm2d's results and the check.
Shared by test_sync_batch_norm_accuracy.py (the five aten ops in one process) and
test_distributed.py (SyncBatchNorm on gloo ranks, distributed_worker.py)."""

from __future__ import annotations

import torch

EPS = 1e-5
MOMENTUM = 0.1
# ours ≤ RATIO × BatchNorm2d's error (or within half an ulp of the largest true value)
RATIO = 1.5
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# |mean| ≫ std where the dtype can still tell the values apart: float16 has 0.25 steps
# at 300, bfloat16 0.25 at 40 (at 1e4 every bfloat16 value would be the same).
LARGE_MEAN = {torch.float32: 1e4, torch.float16: 300.0, torch.bfloat16: 40.0}

# name: (rows per rank, channels, H = W, (scale, offset) per rank or None for the dtype's
# large mean). "apex_different_batch" follows the description of NVIDIA apex's
# two_gpu_test_different_batch_size (rank batches 16 × 50·randn and 8 × randn).
CASES = {
    "apex_different_batch": ([16, 8], 24, 6, [(50.0, 0.0), (1.0, 0.0)]),
    "large_mean": ([5, 5, 6], 24, 5, None),
    "uneven": ([1, 13, 3], 24, 5, [(2.0, 3.0), (2.0, 3.0), (2.0, 3.0)]),
}
CASE_WORLD = {"apex_different_batch": 2, "large_mean": 3, "uneven": 3}
# SyncBatchNorm's outputs (weight and bias gradients summed over the ranks, as data
# parallelism does; each rank rounds its own to the parameters' dtype, as torch's does).
OUTPUTS = ["y", "dx", "weight_grad", "bias_grad", "running_mean", "running_var"]


def problem(name: str, dtype: torch.dtype) -> dict:
    """Per-rank inputs and output gradients (lists, in dtype), and the layer's parameters
    and running statistics (in dtype, as nn.BatchNorm2d(dtype=dtype) holds them)."""
    rows, c, hw, spreads = CASES[name]
    gen = torch.Generator().manual_seed(sum(map(ord, name)))
    if spreads is None:
        spreads = [(1.0, LARGE_MEAN[dtype])] * len(rows)
    xs, dys = [], []
    for n, (scale, offset) in zip(rows, spreads):
        x = torch.randn(n, c, hw, hw, generator=gen, dtype=torch.float64) * scale + offset
        xs.append(x.to(dtype))
        dys.append(torch.randn(n, c, hw, hw, generator=gen, dtype=torch.float64).to(dtype))
    params = dict(weight=1 + 0.1 * torch.randn(c, generator=gen, dtype=torch.float64),
                  bias=0.1 * torch.randn(c, generator=gen, dtype=torch.float64),
                  running_mean=0.3 * torch.randn(c, generator=gen, dtype=torch.float64),
                  running_var=1 + torch.rand(c, generator=gen, dtype=torch.float64))
    return dict(xs=xs, dys=dys, params={k: v.to(dtype) for k, v in params.items()})


def batch_norm2d(p: dict, dtype: torch.dtype) -> dict:
    """nn.BatchNorm2d in `dtype` on the whole batch: every output, plus the batch mean and
    invstd it normalised with (aten's native_batch_norm, which it runs on CPU)."""
    x = torch.cat(p["xs"]).to(dtype)
    dy = torch.cat(p["dys"]).to(dtype)
    bn = torch.nn.BatchNorm2d(x.size(1), eps=EPS, momentum=MOMENTUM, dtype=dtype)
    with torch.no_grad():
        for name, value in p["params"].items():
            getattr(bn, name).copy_(value.to(dtype))
    xg = x.clone().requires_grad_()
    y = bn(xg)
    y.backward(dy)
    _, mean, invstd = torch.native_batch_norm(
        x, p["params"]["weight"].to(dtype), p["params"]["bias"].to(dtype),
        p["params"]["running_mean"].to(dtype).clone(), p["params"]["running_var"].to(dtype).clone(),
        True, MOMENTUM, EPS)
    return dict(y=y.detach(), dx=xg.grad, weight_grad=bn.weight.grad, bias_grad=bn.bias.grad,
                running_mean=bn.running_mean, running_var=bn.running_var, mean=mean,
                invstd=invstd)


def truth(p: dict) -> dict:
    """The float64 truth: BatchNorm2d in float64 on the same (dtype-rounded) values."""
    return batch_norm2d(p, torch.float64)


def errors(results: dict, exact: dict) -> dict:
    return {k: (v.double() - exact[k]).abs().max().item() for k, v in results.items()}


def check(ours: dict, exact: dict, bn2d: dict, dtype: torch.dtype, outputs: list[str]) -> None:
    """Each output's largest error against float64 at most RATIO × BatchNorm2d's, or
    within half an ulp of `dtype` at the output's largest true value (a correctly rounded
    output has no smaller bound to meet; in float16/bfloat16 the parameter gradients of
    two ranks, each rounded to the dtype, can be two such roundings where BatchNorm2d's
    is one)."""
    theirs = errors({k: bn2d[k] for k in outputs}, exact)
    mine = errors({k: ours[k] for k in outputs}, exact)
    half_ulp = torch.finfo(dtype).eps / 2
    failures = []
    for k in outputs:
        rounding = half_ulp * exact[k].abs().max().item()
        bound = max(RATIO * theirs[k], rounding)
        if not mine[k] <= bound:
            failures.append(f"{k}: ours {mine[k]:.3e} vs BatchNorm2d {theirs[k]:.3e} "
                            f"(ratio {mine[k] / max(theirs[k], 1e-300):.2f}, bound {bound:.3e})")
    assert not failures, f"{dtype}: " + "; ".join(failures)
