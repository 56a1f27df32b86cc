"""One rank of a scenario on the emulated NPU (tests/npu_emulation; started by
tests/test_npu_emulation.py with the stand-in torch_npu on PYTHONPATH).

Each scenario runs a user-facing entry point twice from the same host data, on device
"npu" (the NPU branch of our code over CANN's emulated ops) and on the CPU (our kernels),
and saves both, with the host synchronisations the NPU run made, for the parent to
compare. With WORLD > 1 the ranks form a gloo group, standing in for hccl: the collectives
of the NPU run are gloo's over the emulated tensors' host memory.

    python tests/npu_emulation_worker.py SCENARIO RANK WORLD PORT OUT_DIR
"""

from __future__ import annotations

import datetime
import pathlib
import sys

import torch
import torch.distributed as dist

import torch_npu  # noqa: F401  (the emulation: "npu" device, torch_npu's and our kernels)

import ascend_ops
from npu_emulation import cann

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def host(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: host(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(host(v) for v in value)
    return value


def timed_syncs(step):
    """step()'s results on the host and the host syncs it made (before any copy back)."""
    before = torch_npu.host_syncs()
    results = step()
    return results, torch_npu.host_syncs() - before


def sync_batch_norm(rank: int, world: int, group) -> dict:
    """nn.SyncBatchNorm forward and backward, the layer and input in each dtype; the batch
    split unevenly over the ranks."""
    out = {}
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        gen = torch.Generator().manual_seed(7)
        rows = [3 + 2 * r for r in range(world)]
        x_all = torch.randn(sum(rows), 5, 4, 3, generator=gen) * 2 + 1
        g_all = torch.randn(x_all.shape, generator=gen)
        start = sum(rows[:rank])
        x_part, g_part = x_all[start:start + rows[rank]], g_all[start:start + rows[rank]]
        runs = {}
        for device in ("npu", "cpu"):
            def step():
                bn = ascend_ops.nn.SyncBatchNorm(5, process_group=group).to(device=device, dtype=dtype)
                x = x_part.to(dtype).to(device).requires_grad_()
                y = bn(x)
                y.backward(g_part.to(dtype).to(device))
                return (y, x.grad, bn.weight.grad, bn.bias.grad, bn.running_mean, bn.running_var)
            results, syncs = timed_syncs(step)
            runs[device] = host(results)
            if device == "npu":
                runs["syncs"] = syncs
        out[str(dtype).removeprefix("torch.")] = runs
    return out


def linear_cross_entropy(rank: int, world: int, group) -> dict:
    """linear_cross_entropy forward and backward, each rank a vocabulary shard of 256 ids
    (>= 128, as CANN's high-performance backward needs), in both modes and half dtypes."""
    shard, h = 256, 48
    out = {}
    for dtype in (torch.bfloat16, torch.float16):
        for mode in ("memory-saving", "high-performance"):
            gen = torch.Generator().manual_seed(11)
            x_all = (torch.randn(3, 7, h, generator=gen) / 4).to(dtype)
            w_all = (torch.randn(shard * world, h, generator=gen) / 4).to(dtype)
            target = torch.randint(0, shard * world, (3, 7), generator=gen)
            target[0, :2] = -100
            w_part = w_all[rank * shard:(rank + 1) * shard]
            runs = {}
            for device in ("npu", "cpu"):
                def step():
                    x = x_all.to(device).requires_grad_()
                    w = w_part.to(device).requires_grad_()
                    loss = ascend_ops.linear_cross_entropy(x, w, target.to(device),
                                                           process_group=group, mode=mode)
                    loss.backward()
                    return loss.detach(), x.grad, w.grad
                (loss, x_grad, w_grad), syncs = timed_syncs(step)
                if group is not None:  # each rank holds its shard's part of the input gradient
                    dist.all_reduce(x_grad, group=group)
                runs[device] = host((loss, x_grad, w_grad))
                if device == "npu":
                    runs["syncs"] = syncs
            out[f"{str(dtype).removeprefix('torch.')} {mode}"] = runs
    return out


#: Option sets CANN's FLCE cannot express (docs/npu.md "Loss options on the NPU"): the
#: npu-composition+custom route, our kernel with the options in the backward.
OPTION_SETS = {
    "softcap-zloss": dict(softcap=30.0, lse_square_scale=1e-4),
    "bias-scale": dict(linear_bias=True, logit_scale=0.5),
    "smoothing-weights": dict(label_smoothing=0.1, ce_weight=True),
}


def linear_cross_entropy_options(rank: int, world: int, group) -> dict:
    """linear_cross_entropy with each option set, forward and backward, bfloat16, each rank a
    vocabulary shard of 300 ids (a tail past the kernel's 256-column blocks)."""
    shard, h = 300, 40
    out = {}
    for name, options in OPTION_SETS.items():
        gen = torch.Generator().manual_seed(13)
        x_all = (torch.randn(3, 45, h, generator=gen) / 2).to(torch.bfloat16)
        w_all = (torch.randn(shard * world, h, generator=gen) / 2).to(torch.bfloat16)
        b_all = torch.randn(shard * world, generator=gen).to(torch.bfloat16)
        cw_all = 0.5 + torch.rand(shard * world, generator=gen)
        target = torch.randint(0, shard * world, (3, 45), generator=gen)
        target[0, :5] = -100
        part = slice(rank * shard, (rank + 1) * shard)
        values = {k: v for k, v in options.items() if k not in ("linear_bias", "ce_weight")}
        runs = {}
        for device in ("npu", "cpu"):
            def step():
                x = x_all.to(device).requires_grad_()
                w = w_all[part].to(device).requires_grad_()
                b = b_all[part].to(device).requires_grad_() if options.get("linear_bias") else None
                cw = cw_all[part].to(device) if options.get("ce_weight") else None
                loss = ascend_ops.linear_cross_entropy(x, w, target.to(device), linear_bias=b, ce_weight=cw,
                                                       process_group=group, **values)
                loss.backward()
                return loss.detach(), x.grad, w.grad, *((b.grad,) if b is not None else ())
            results, syncs = timed_syncs(step)
            if group is not None:  # each rank holds its shard's part of the input gradient
                dist.all_reduce(results[1], group=group)
            runs[device] = host(results)
            if device == "npu":
                runs["syncs"] = syncs
        out[name] = runs
    return out


def hugging_face(rank: int, world: int, group) -> dict:
    """One training step of a tiny Llama patched by aot.apply, bfloat16: loss, the head's
    and the embedding's gradients, and the head after an SGD step."""
    import ascend_ops.integrations.transformers as aot
    from hf_tiny_models import batch, tiny_model

    ids, labels = batch()
    runs = {}
    for device in ("npu", "cpu"):
        model = aot.apply(tiny_model("llama", torch.bfloat16)).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        loss = model(input_ids=ids.to(device), labels=labels.to(device)).loss
        loss.backward()
        head_grad = model.lm_head.weight.grad.clone()
        embed_grad = model.model.embed_tokens.weight.grad.clone()
        optimizer.step()
        runs[device] = host((loss.detach(), head_grad, embed_grad, model.lm_head.weight))
    return runs


SCENARIOS = {"sync_batch_norm": sync_batch_norm, "linear_cross_entropy": linear_cross_entropy,
             "linear_cross_entropy_options": linear_cross_entropy_options,
             "hugging_face": hugging_face}


def main(scenario: str, rank: int, world: int, port: int, out: pathlib.Path) -> None:
    group = None
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=120))
        group = dist.group.WORLD
    try:
        results = SCENARIOS[scenario](rank, world, group)
        results["aclnn calls"] = dict(cann.CALLS)  # the CANN ops the NPU runs reached
        torch.save(results, out / f"rank{rank}.pt")
    finally:
        if group is not None:
            dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), pathlib.Path(sys.argv[5]))
