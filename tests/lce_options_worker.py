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
from ascend_ops.training.lce import route_cpu_options, routes

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
           ("weights+accuracy", "mean", torch.bfloat16, routes.NPU_COMPOSITION_OPERATORS),
           ("weights+accuracy", "sum", torch.bfloat16, routes.NPU_OPERATORS)])

BT, V_SHARD = 29, 23  # odd sizes; the whole vocabulary is V_SHARD * world


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
    shard = slice(rank * V_SHARD, (rank + 1) * V_SHARD)
    xr = x.clone().requires_grad_()
    wr = w[shard].clone().requires_grad_()
    br = b[shard].clone().requires_grad_() if b is not None else None
    cwr = cw[shard] if "ce_weight" in names else None
    kwargs = options_of(names)
    if route in ("cpu", "cpu-recompute"):
        out = ascend_ops.linear_cross_entropy(
            xr, wr, t, linear_bias=br, ce_weight=cwr, reduction=reduction,
            return_z_loss=True, return_lse=True, return_token_accuracy=True,
            process_group=dist.group.WORLD, **kwargs)
        loss, z_loss, lse, accuracy = out
    else:  # an NPU route's device-agnostic code, forced on CPU tensors
        out = ascend_ops.linear_cross_entropy(
            xr, wr, t, ce_weight=cwr, reduction=reduction,
            label_smoothing=kwargs.get("label_smoothing", 0.0), return_z_loss=True,
            return_lse=True, return_token_accuracy=route == routes.NPU_COMPOSITION_OPERATORS,
            process_group=dist.group.WORLD, vocab_start_index=rank * V_SHARD, impl=route)
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
            results[run] = run_one(rank, world, *run)
            route_cpu_options.BACKWARD_CHUNK_COLUMNS = None
            os.environ.pop("ASCEND_OPS_LCE_GRAD_CACHE_MIB", None)
        torch.save(results, out / f"rank{rank}.pt")
    finally:
        gc.collect()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4]))
