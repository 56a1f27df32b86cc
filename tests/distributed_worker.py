"""One rank of the multi-process tests (tests/test_distributed.py starts `world` of them).

Every rank builds the same global problem from fixed seeds, takes its share (a vocabulary
shard for linear_cross_entropy, a slice of the batch for SyncBatchNorm), runs forward and
backward over gloo on 127.0.0.1, and saves what it got for the parent to compare with one
process on the whole problem.

    python tests/distributed_worker.py RANK WORLD PORT OUT_DIR
"""

from __future__ import annotations

import datetime
import gc
import os
import pathlib
import sys

import torch
import torch.distributed as dist

import ascend_ops
import bn_accuracy
from ascend_ops.training.lce import grad_cache as _grad_cache
from ascend_ops.training.lce import kept_rows as _kept_rows

H = 24


def lce_problem(world: int) -> dict:
    """The global problem: input [3, 7, H] bf16, weight [Vtotal, H], targets with ignored rows."""
    gen = torch.Generator().manual_seed(100 + world)
    shard_sizes = [37] * world  # even shards (start = rank * V)
    uneven_sizes = [20 + 17 * r for r in range(world)]  # explicit vocab_start_index
    total = sum(shard_sizes)
    input = (torch.randn(3, 7, H, generator=gen) / 2).bfloat16()
    weight = torch.randn(total, H, generator=gen).bfloat16()
    target = torch.randint(0, total, (3, 7), generator=gen)
    target[0, :2] = -100  # ignored rows
    target[2, 3] = total - 1  # the last id of the last shard
    grad_none = torch.rand(3, 7, generator=gen)
    uneven_total = sum(uneven_sizes)
    uneven_weight = torch.randn(uneven_total, H, generator=gen).bfloat16()
    uneven_target = torch.randint(0, uneven_total, (3, 7), generator=gen)
    return dict(input=input, weight=weight, target=target, grad_none=grad_none,
                shard_sizes=shard_sizes, uneven_sizes=uneven_sizes,
                uneven_weight=uneven_weight, uneven_target=uneven_target)


# (mode, reduction, rows): "kept-rows" gathers the rows not ignored whatever their count
# (training/lce/kept_rows.py; at this size the threshold would run every row, "all-rows")
LCE_RUNS = [(mode, reduction, rows) for mode in ("memory-saving", "high-performance")
            for reduction in ("mean", "sum", "none") for rows in ("all-rows", "kept-rows")]


def bn_problem(world: int) -> dict:
    """Global batches for SyncBatchNorm, split unevenly (one rank may get 0 rows)."""
    gen = torch.Generator().manual_seed(200 + world)
    rows = {1: [7], 2: [3, 6], 3: [4, 0, 7]}[world]
    x2 = torch.randn(sum(rows), 5, generator=gen) * 3 + 2
    x4 = torch.randn(sum(rows), 3, 4, 5, generator=gen) - 1
    return dict(rows=rows, x2=x2, g2=torch.randn(x2.shape, generator=gen),
                x4=x4, g4=torch.randn(x4.shape, generator=gen))


# name: (batch, momentum, dtype, channels_last, every rank empty)
BN_CASES = {
    "x2": ("x2", 0.3, torch.float32, False, False),
    "x4": ("x4", None, torch.float32, False, False),
    "x4_f64": ("x4", 0.1, torch.float64, False, False),
    "x4_channels_last": ("x4", 0.1, torch.float32, True, False),
    "x4_bf16": ("x4", 0.1, torch.bfloat16, False, False),
    "all_empty": ("x4", 0.1, torch.float32, False, True),
}


def bn_case_batch(p: dict, name: str, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole batch (input, grad) of a BN_CASES case at a step."""
    key, _, dtype, channels_last, empty = BN_CASES[name]
    x, g = p[key] * (1 + step), p["g" + key[1:]]
    if empty:
        x, g = x[:0], g[:0]
    x, g = x.to(dtype), g.to(dtype)
    if channels_last:
        x, g = (t.contiguous(memory_format=torch.channels_last) for t in (x, g))
    return x, g


def rank_slice(rows: list[int], rank: int) -> slice:
    start = sum(rows[:rank])
    return slice(start, start + rows[rank])


def run_lce(rank: int, world: int) -> dict:
    p = lce_problem(world)
    v = p["shard_sizes"][rank]
    results = {}
    for mode, reduction, rows in LCE_RUNS:
        x = p["input"].clone().requires_grad_()
        w = p["weight"][rank * v:(rank + 1) * v].clone().requires_grad_()
        saved = _kept_rows.MIN_IGNORED_VOCAB_PER_ROW
        _kept_rows.MIN_IGNORED_VOCAB_PER_ROW = 0 if rows == "kept-rows" else 10**9
        try:
            loss = ascend_ops.linear_cross_entropy(x, w, p["target"], reduction=reduction,
                                                   process_group=dist.group.WORLD, mode=mode)
        finally:
            _kept_rows.MIN_IGNORED_VOCAB_PER_ROW = saved
        gathered = loss.grad_fn.saved.kept is not None
        loss.backward(p["grad_none"] if reduction == "none" else None)
        results[(mode, reduction, rows)] = (loss.detach(), x.grad, w.grad, gathered)
    start = sum(p["uneven_sizes"][:rank])
    x = p["input"].clone().requires_grad_()
    w = p["uneven_weight"][start:start + p["uneven_sizes"][rank]].clone().requires_grad_()
    loss = ascend_ops.linear_cross_entropy(x, w, p["uneven_target"], vocab_start_index=start,
                                           process_group=dist.group.WORLD)
    loss.backward()
    results["uneven"] = (loss.detach(), x.grad, w.grad)
    results["uneven_paths"] = {}
    # The gradient cache's plan must agree across ranks: chunk sizes that differ per rank
    # (the smallest wins: per-chunk collectives), and a budget that only some ranks meet
    # (then every rank recomputes).
    for name, chunk_rows, budget_mib in [("chunked", 2 + 3 * rank, None),
                                         ("some_over_budget", None, "0" if rank == 0 else None)]:
        saved_chunk, saved_env = _grad_cache.CHUNK_LOGITS_BYTES, os.environ.get(_grad_cache.GRAD_CACHE_ENV)
        if chunk_rows is not None:
            _grad_cache.CHUNK_LOGITS_BYTES = chunk_rows * p["uneven_sizes"][rank] * 4
        if budget_mib is not None:
            os.environ[_grad_cache.GRAD_CACHE_ENV] = budget_mib
        try:
            x = p["input"].clone().requires_grad_()
            w = p["uneven_weight"][start:start + p["uneven_sizes"][rank]].clone().requires_grad_()
            loss = ascend_ops.linear_cross_entropy(x, w, p["uneven_target"], vocab_start_index=start,
                                                   process_group=dist.group.WORLD)
            results["uneven_paths"][name] = loss.grad_fn.saved.grad_cached
            loss.backward()
            results["uneven_" + name] = (loss.detach(), x.grad, w.grad)
        finally:
            _grad_cache.CHUNK_LOGITS_BYTES = saved_chunk
            if saved_env is None:
                os.environ.pop(_grad_cache.GRAD_CACHE_ENV, None)
            else:
                os.environ[_grad_cache.GRAD_CACHE_ENV] = saved_env
    return results


def run_bn(rank: int, world: int) -> dict:
    p = bn_problem(world)
    part = rank_slice(p["rows"], rank)
    results = {}
    for name, (key, momentum, dtype, _, _) in BN_CASES.items():
        bn = ascend_ops.nn.SyncBatchNorm(p[key].size(1), momentum=momentum, dtype=dtype)
        outputs = []
        for step in range(2):  # two steps: running stats (momentum None averages them)
            x, g = bn_case_batch(p, name, step)
            x = x[part].clone().requires_grad_()
            y = bn(x)
            y.backward(g[part])
            outputs.append((y.detach(), x.grad))
        results[name] = dict(outputs=outputs, weight_grad=bn.weight.grad, bias_grad=bn.bias.grad,
                             running_mean=bn.running_mean, running_var=bn.running_var,
                             num_batches_tracked=bn.num_batches_tracked)
    return results


def run_bn_accuracy(rank: int, world: int) -> dict:
    """bn_accuracy's cases for this world size, one SyncBatchNorm step each per dtype."""
    results = {}
    for name, case_world in bn_accuracy.CASE_WORLD.items():
        if case_world != world:
            continue
        for dtype in bn_accuracy.DTYPES:
            p = bn_accuracy.problem(name, dtype)
            x, dy = p["xs"][rank].clone().requires_grad_(), p["dys"][rank]
            bn = ascend_ops.nn.SyncBatchNorm(x.size(1), eps=bn_accuracy.EPS,
                                             momentum=bn_accuracy.MOMENTUM, dtype=dtype)
            with torch.no_grad():
                for key, value in p["params"].items():
                    getattr(bn, key).copy_(value)
            y = bn(x)
            y.backward(dy)
            results[(name, dtype)] = dict(y=y.detach(), dx=x.grad, weight_grad=bn.weight.grad,
                                          bias_grad=bn.bias.grad, running_mean=bn.running_mean,
                                          running_var=bn.running_var)
    return results


def main(rank: int, world: int, port: int, out: pathlib.Path) -> None:
    torch.set_num_threads(1)  # ranks share the machine's cores
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        torch.save(dict(lce=run_lce(rank, world), bn=run_bn(rank, world),
                        bn_accuracy=run_bn_accuracy(rank, world)), out / f"rank{rank}.pt")
    finally:
        gc.collect()  # free the group's last users while it lives (scripts/train_demo.py)
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4]))
