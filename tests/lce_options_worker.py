"""One rank of the loss options' multi-process test (tests/test_lce_options_distributed.py
starts `world` of them): every rank builds the same global problem, takes its vocabulary
shard of the head's weight, bias and class weights, runs linear_cross_entropy with the
options over gloo, and saves the loss, the extra outputs and its gradients.

    python tests/lce_options_worker.py RANK WORLD PORT OUT_DIR
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
from ascend_ops.training.lce import grad_cache, route_cpu_options, routes

from lce_options_oracle import STRONG, problem

#: (option set, reduction, dtype, route): route "cpu" is the CPU kernels; the others run
#: an NPU route's device-agnostic code on CPU tensors.
SETS = {
    "all": tuple(STRONG),
    "softcap+z-loss": ("softcap", "lse_square_scale"),
    "smoothing+weights": ("label_smoothing", "ce_weight"),
    "weights+accuracy": ("ce_weight",),
}
RUNS = ([(name, reduction, torch.bfloat16, "cpu") for name in SETS
         for reduction in ("mean", "sum", "none")]
        + [("all", "mean", torch.float32, "cpu"), ("all", "none", torch.float16, "cpu"),
           ("all", "mean", torch.bfloat16, "cpu-recompute"),
           ("all", "mean", torch.float16, "cpu-uneven"),
           ("weights+accuracy", "mean", torch.bfloat16, routes.NPU_COMPOSITION_OPERATORS),
           ("weights+accuracy", "sum", torch.bfloat16, routes.NPU_OPERATORS)])

BT, V_SHARD = 29, 23  # odd sizes; the whole vocabulary is V_SHARD * world
#: "cpu-uneven": rank r's shard is V_SHARD + UNEVEN[world][r] ids (the same whole
#: vocabulary), in row chunks of at most UNEVEN_CHUNK_BYTES of fp32 logits: 6 rows at
#: V = 29, 10 at 17, so the ranks run 5 and 3 chunks of the 29 rows.
UNEVEN = {1: (0,), 2: (6, -6)}
UNEVEN_CHUNK_BYTES = 4 * V_SHARD * 8
CHUNK_LOGITS_BYTES = grad_cache.CHUNK_LOGITS_BYTES


def shard_of(rank: int, world: int, route: str) -> slice:
    sizes = [V_SHARD + d for d in UNEVEN[world]] if route == "cpu-uneven" else [V_SHARD] * world
    start = sum(sizes[:rank])
    return slice(start, start + sizes[rank])


def global_problem(world: int, dtype, names):
    x, w, t, b, cw = problem(bt=BT, v=V_SHARD * world, dtype=dtype, seed=40 + world,
                             bias="linear_bias" in names, ce_weight=True)
    t[3] = V_SHARD * world - 1  # the last id of the last shard
    grad = torch.rand(BT, generator=torch.Generator().manual_seed(7)) + 0.5
    return x, w, t, b, cw, grad


def options_of(names):
    return {n: STRONG[n] for n in names if n not in ("linear_bias", "ce_weight")}


def run_one(rank, world, name, reduction, dtype, route):
    names = SETS[name]
    x, w, t, b, cw, grad = global_problem(world, dtype, names)
    shard = shard_of(rank, world, route)
    xr = x.clone().requires_grad_()
    wr = w[shard].clone().requires_grad_()
    br = b[shard].clone().requires_grad_() if b is not None else None
    cwr = cw[shard] if "ce_weight" in names else None
    kwargs = options_of(names)
    if route in ("cpu", "cpu-recompute", "cpu-uneven"):
        out = ascend_ops.linear_cross_entropy(
            xr, wr, t, linear_bias=br, ce_weight=cwr, reduction=reduction,
            return_z_loss=True, return_lse=True, return_token_accuracy=True,
            process_group=dist.group.WORLD, vocab_start_index=shard.start, **kwargs)
        loss, z_loss, lse, accuracy = out
    else:  # an NPU route's device-agnostic code, forced on CPU tensors
        out = ascend_ops.linear_cross_entropy(
            xr, wr, t, ce_weight=cwr, reduction=reduction,
            label_smoothing=kwargs.get("label_smoothing", 0.0), return_z_loss=True,
            return_lse=True, return_token_accuracy=route == routes.NPU_COMPOSITION_OPERATORS,
            process_group=dist.group.WORLD, vocab_start_index=shard.start, impl=route)
        loss, z_loss, lse, accuracy = out
    loss.backward(grad if reduction == "none" else None)
    return dict(loss=loss.detach(), z_loss=z_loss, lse=lse, token_accuracy=accuracy,
                input=xr.grad, weight=wr.grad, linear_bias=None if br is None else br.grad)


def main(rank: int, world: int, port: int, out: pathlib.Path) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        results = {}
        for run in RUNS:
            if run[3] == "cpu-recompute":  # no logits-gradient cache, vocabulary chunks
                os.environ["ASCEND_OPS_LCE_GRAD_CACHE_MIB"] = "0"
                route_cpu_options.BACKWARD_CHUNK_COLUMNS = 8
            if run[3] == "cpu-uneven":  # row chunks whose number differs between the ranks
                grad_cache.CHUNK_LOGITS_BYTES = UNEVEN_CHUNK_BYTES
            results[run] = run_one(rank, world, *run)
            route_cpu_options.BACKWARD_CHUNK_COLUMNS = None
            grad_cache.CHUNK_LOGITS_BYTES = CHUNK_LOGITS_BYTES
            os.environ.pop("ASCEND_OPS_LCE_GRAD_CACHE_MIB", None)
        torch.save(results, out / f"rank{rank}.pt")
    finally:
        gc.collect()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4]))
