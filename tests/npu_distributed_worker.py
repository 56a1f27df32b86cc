"""One rank of the NPU training-step test (tests/test_npu.py starts `world` of them, one
per NPU, over hccl).

Every rank builds the same global problem from fixed seeds on the host, takes its share
(a vocabulary shard for linear_cross_entropy, a slice of the batch for SyncBatchNorm),
runs forward and backward on its NPU and saves the results on the host for the parent to
compare with float64 on the whole problem.

    python tests/npu_distributed_worker.py RANK WORLD PORT OUT_DIR
"""

from __future__ import annotations

import datetime
import pathlib
import sys

import torch
import torch.distributed as dist

import ascend_ops

H = 64
SHARD = 256  # >= 128: CANN's built-in backward in high-performance mode needs V >= 128
MODES = ("memory-saving", "high-performance")


def lce_problem(world: int) -> dict:
    """input [4, 9, H] bf16, weight [world * SHARD, H] bf16, targets with ignored rows."""
    gen = torch.Generator().manual_seed(300 + world)
    total = SHARD * world
    target = torch.randint(0, total, (4, 9), generator=gen)
    target[0, :3] = -100
    target[3, 8] = total - 1
    return dict(input=(torch.randn(4, 9, H, generator=gen) / 4).bfloat16(),
                weight=(torch.randn(total, H, generator=gen) / 4).bfloat16(), target=target)


def bn_problem(world: int) -> dict:
    """[N, 3, 4, 5] float32 split unevenly over the ranks."""
    gen = torch.Generator().manual_seed(400 + world)
    rows = [3 + 2 * r for r in range(world)]
    x = torch.randn(sum(rows), 3, 4, 5, generator=gen) * 2 + 1
    return dict(rows=rows, x=x, g=torch.randn(x.shape, generator=gen))


def run(rank: int, world: int, device: torch.device) -> dict:
    results = {}
    p = lce_problem(world)
    for mode in MODES:
        x = p["input"].to(device).requires_grad_()
        w = p["weight"][rank * SHARD:(rank + 1) * SHARD].to(device).requires_grad_()
        loss_fn = ascend_ops.nn.LinearCrossEntropyLoss(mode=mode, process_group=dist.group.WORLD)
        loss = loss_fn(x, w, p["target"].to(device))
        loss.backward()
        input_grad = x.grad.clone()
        dist.all_reduce(input_grad)  # each rank holds its shard's part of the input gradient
        results[mode] = (loss.detach().cpu(), input_grad.cpu(), w.grad.cpu())
    b = bn_problem(world)
    start = sum(b["rows"][:rank])
    part = slice(start, start + b["rows"][rank])
    bn = ascend_ops.nn.SyncBatchNorm(3).to(device)
    x = b["x"][part].to(device).requires_grad_()
    y = bn(x)
    y.backward(b["g"][part].to(device))
    results["bn"] = dict(y=y.detach().cpu(), x_grad=x.grad.cpu(), weight_grad=bn.weight.grad.cpu(),
                         bias_grad=bn.bias.grad.cpu(), running_mean=bn.running_mean.cpu(),
                         running_var=bn.running_var.cpu())
    return results


def main(rank: int, world: int, port: int, out: pathlib.Path) -> None:
    import torch_npu  # noqa: F401  (registers the npu device and hccl)

    torch.npu.set_device(rank)
    dist.init_process_group("hccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    try:
        torch.save(run(rank, world, torch.device("npu", rank)), out / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4]))
