"""One rank of the NPU training-step test (tests/test_npu.py starts `world` of them, one
per NPU, over hccl).

Every rank builds the same global problem from fixed seeds on the host, takes its share
(a vocabulary shard for linear_cross_entropy, a slice of the batch for SyncBatchNorm),
runs forward and backward on its NPU and saves the results on the host for the parent to
compare with float64 on the whole problem. The loss options run on uneven shards
(OPTION_SHARDS), one option set per NPU route; a set whose route needs our op package
where none is installed saves the refusal instead.

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


#: Vocabulary shards of the loss options' problem, by rank: uneven, each past the custom
#: kernel's 256-column blocks or below one.
OPTION_SHARDS = (300, 212, 233, 170)
#: One or more option sets per NPU route (docs/npu.md "Loss options on the NPU").
OPTION_SETS = {
    "weights-lse-zloss": dict(ce_weight=True, return_lse=True, return_z_loss=True),
    "weights-accuracy": dict(ce_weight=True, return_token_accuracy=True),
    "softcap-zloss": dict(softcap=30.0, lse_square_scale=1e-4, return_z_loss=True),
    "bias-scale": dict(linear_bias=True, logit_scale=0.5),
    "smoothing-weights": dict(label_smoothing=0.1, ce_weight=True),
}


def options_problem(world: int) -> dict:
    """input [3, 45, H] bf16, the whole head [V, H] and bias [V] bf16, class weights [V]
    float32 and targets with ignored rows, V = sum(OPTION_SHARDS[:world])."""
    gen = torch.Generator().manual_seed(500 + world)
    total = sum(OPTION_SHARDS[:world])
    target = torch.randint(0, total, (3, 45), generator=gen)
    target[0, :5] = -100
    target[2, 44] = total - 1
    return dict(input=(torch.randn(3, 45, H, generator=gen) / 2).bfloat16(),
                weight=(torch.randn(total, H, generator=gen) / 2).bfloat16(),
                linear_bias=torch.randn(total, generator=gen).bfloat16(),
                ce_weight=0.5 + torch.rand(total, generator=gen), target=target)


def option_values(options: dict) -> dict:
    """The set's keyword arguments that are values, not tensors."""
    return {k: v for k, v in options.items() if k not in ("linear_bias", "ce_weight")}


def run_options(rank: int, world: int, device: torch.device) -> dict:
    """Each option set's outputs and gradients on this rank's shard, or the refusal."""
    p = options_problem(world)
    start = sum(OPTION_SHARDS[:rank])
    shard = slice(start, start + OPTION_SHARDS[rank])
    results = {}
    for name, options in OPTION_SETS.items():
        x = p["input"].to(device, copy=True).requires_grad_()
        w = p["weight"][shard].to(device, copy=True).requires_grad_()
        b = (p["linear_bias"][shard].to(device, copy=True).requires_grad_()
             if options.get("linear_bias") else None)
        cw = p["ce_weight"][shard].to(device) if options.get("ce_weight") else None
        try:
            out = ascend_ops.linear_cross_entropy(
                x, w, p["target"].to(device), linear_bias=b, ce_weight=cw,
                process_group=dist.group.WORLD, vocab_start_index=start, **option_values(options))
        except NotImplementedError as error:  # our op package is not installed
            results[name] = {"refused": str(error)}
            continue
        loss, z_loss, lse, accuracy = out if isinstance(out, tuple) else (out, None, None, None)
        loss.backward()
        input_grad = x.grad.clone()
        dist.all_reduce(input_grad)  # each rank holds its shard's part of the input gradient
        cpu = lambda t: None if t is None else t.detach().cpu()  # noqa: E731
        results[name] = dict(loss=cpu(loss), z_loss=cpu(z_loss), lse=cpu(lse),
                             token_accuracy=cpu(accuracy), input=cpu(input_grad),
                             weight=cpu(w.grad), linear_bias=cpu(b.grad if b is not None else None))
    return results


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
    results["options"] = run_options(rank, world, device)
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
