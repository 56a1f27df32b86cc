#!/usr/bin/env python
"""Train two small models on 2 CPU ranks (gloo) and in one process; the curves must agree.

- A GPT-style language model: token embedding, two pre-norm transformer blocks, and a
  vocab-parallel LM head whose loss is `ascend_ops.linear_cross_entropy` (each rank holds
  a vocabulary shard of the head; the trunk is replicated and its input gradient summed).
- A small CNN with `ascend_ops.nn.SyncBatchNorm`, data parallel over an uneven batch split;
  the one-process run uses plain `torch.nn.BatchNorm2d` on the whole batch.

Prints both loss curves per model and their largest difference, writes them as JSON and
a PNG (blue: one process, red: 2 ranks).

    python scripts/train_demo.py [--steps 30] [--out results/train_demo]
    torchrun --nproc_per_node 2 scripts/train_demo.py      # the same, ranks from torchrun
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import pathlib
import socket
import subprocess
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import ascend_ops

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from png_plot import save_line_plot  # noqa: E402

VOCAB, D_MODEL, HEADS, SEQ, BATCH = 96, 32, 4, 16, 8
CNN_BATCH_SPLIT = [10, 6]  # images per rank: uneven on purpose
CLASSES = 4


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.attention = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(), nn.Linear(4 * D_MODEL, D_MODEL))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        causal = torch.triu(torch.ones(x.size(1), x.size(1), dtype=torch.bool), diagonal=1)
        h = self.norm1(x)
        x = x + self.attention(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyGPT(nn.Module):
    """Trunk replicated on every rank; the LM head holds rows [start, start + V/world)."""

    def __init__(self, rank: int, world: int, group) -> None:
        super().__init__()
        torch.manual_seed(0)  # same initial weights on every rank and in one process
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.position = nn.Parameter(torch.randn(SEQ, D_MODEL) * 0.02)
        self.blocks = nn.Sequential(Block(), Block())
        self.norm = nn.LayerNorm(D_MODEL)
        head = torch.randn(VOCAB, D_MODEL) * 0.05
        shard = VOCAB // world
        self.head = nn.Parameter(head[rank * shard:(rank + 1) * shard].clone())  # V/world x D
        self.group = group

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.blocks(self.embed(tokens) + self.position))  # B x T x D
        h = ascend_ops.distributed.all_reduce_grad(h, self.group)
        # The fused operators take half inputs: the head runs in bfloat16, as under autocast.
        return ascend_ops.linear_cross_entropy(h.bfloat16(), self.head.bfloat16(), targets,
                                               process_group=self.group)


def token_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A learnable toy language: next = (5·token + 3) mod V, with 10% random tokens."""
    gen = torch.Generator().manual_seed(1000 + step)
    tokens = torch.empty(BATCH, SEQ + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, VOCAB, (BATCH,), generator=gen)
    for t in range(SEQ):
        tokens[:, t + 1] = (5 * tokens[:, t] + 3) % VOCAB
    noise = torch.rand(tokens.shape, generator=gen) < 0.1
    tokens[noise] = torch.randint(0, VOCAB, (int(noise.sum()),), generator=gen)
    return tokens[:, :-1], tokens[:, 1:]


def make_cnn(sync: bool) -> nn.Module:
    torch.manual_seed(1)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, CLASSES))
    return ascend_ops.nn.SyncBatchNorm.convert_sync_batchnorm(model) if sync else model


def image_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Classes differ by which colour channel is brighter, plus noise."""
    gen = torch.Generator().manual_seed(2000 + step)
    n = sum(CNN_BATCH_SPLIT)
    labels = torch.randint(0, CLASSES, (n,), generator=gen)
    images = torch.randn(n, 3, 8, 8, generator=gen)
    images[torch.arange(n), labels % 3] += 1.0 + (labels // 3).float()[:, None, None]
    return images, labels


def train(rank: int, world: int, steps: int) -> dict[str, list[float]]:
    """Loss curves of both models; with world > 1 the process group must be initialised."""
    group = dist.group.WORLD if world > 1 else None
    gpt = TinyGPT(rank, world, group)
    gpt_opt = torch.optim.Adam(gpt.parameters(), lr=3e-3)
    cnn = make_cnn(sync=world > 1)
    cnn_opt = torch.optim.SGD(cnn.parameters(), lr=0.1, momentum=0.9)
    gpt_curve, cnn_curve = [], []
    for step in range(steps):
        tokens, targets = token_batch(step)
        loss = gpt.loss(tokens, targets)
        gpt_opt.zero_grad()
        loss.backward()
        gpt_opt.step()
        gpt_curve.append(loss.item())

        images, labels = image_batch(step)
        if world > 1:  # this rank's slice of the global batch
            start = sum(CNN_BATCH_SPLIT[:rank])
            images, labels = images[start:start + CNN_BATCH_SPLIT[rank]], labels[start:start + CNN_BATCH_SPLIT[rank]]
        # Sum over this rank's images / global batch: summing gradients over ranks gives
        # exactly the gradient of the global mean, however unevenly the batch is split.
        local = F.cross_entropy(cnn(images), labels, reduction="sum") / sum(CNN_BATCH_SPLIT)
        cnn_opt.zero_grad()
        local.backward()
        total = local.detach().clone()
        if world > 1:
            for p in cnn.parameters():
                dist.all_reduce(p.grad, group=group)
            dist.all_reduce(total, group=group)
        cnn_opt.step()
        cnn_curve.append(total.item())
    return {"gpt": gpt_curve, "cnn": cnn_curve}


def report(single: dict, ranks: dict, out: pathlib.Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    summary = {"single": single, "ranks": ranks, "max_abs_diff": {}}
    for model in ("gpt", "cnn"):
        diff = max(abs(a - b) for a, b in zip(single[model], ranks[model]))
        summary["max_abs_diff"][model] = diff
        print(f"\n{model}: step  one-process  2-ranks")
        for step, (a, b) in enumerate(zip(single[model], ranks[model])):
            print(f"{model}: {step:4d}  {a:11.6f}  {b:9.6f}")
        print(f"{model}: largest difference {diff:.3g}")
    (out / "curves.json").write_text(json.dumps(summary, indent=1))
    save_line_plot(out / "curves.png", [[single["gpt"], ranks["gpt"]], [single["cnn"], ranks["cnn"]]])
    print(f"\ncurves written to {out / 'curves.json'} and {out / 'curves.png'}")
    return summary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_rank_from_env(args) -> None:
    """One rank, as torchrun (or the launcher below) starts it."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        curves = train(rank, world, args.steps)
    finally:
        # Free what still refers to the group (reference cycles of autograd graphs and
        # their collectives' work objects) while it is alive: collected only at interpreter
        # exit, they raced gloo's threads there ("terminate called without an active
        # exception" in about 1 run of 6).
        gc.collect()
        dist.destroy_process_group()
    if rank == 0:
        if args.curves:  # started by the launcher: hand the curves back
            pathlib.Path(args.curves).write_text(json.dumps(curves))
        else:  # under torchrun: rank 0 also runs the one-process training and reports
            report(train(0, 1, args.steps), curves, args.out)


def launch(args) -> dict:
    """Start 2 ranks as subprocesses, then train in this process, and compare."""
    args.out.mkdir(parents=True, exist_ok=True)
    curves_path = args.out / "ranks.json"
    env = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, __file__, "--steps", str(args.steps),
                               "--curves", str(curves_path)], env={**env, "RANK": str(rank)})
             for rank in range(2)]
    try:
        codes = [p.wait(timeout=args.timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    if any(codes):
        raise SystemExit(f"a rank failed: exit codes {codes}")
    ranks = json.loads(curves_path.read_text())
    curves_path.unlink()  # rank 0's hand-over, not a result
    return report(train(0, 1, args.steps), ranks, args.out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("results/train_demo"))
    parser.add_argument("--curves", help=argparse.SUPPRESS)  # set by the launcher for rank 0
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for the ranks")
    args = parser.parse_args(argv)
    if "RANK" in os.environ:
        run_rank_from_env(args)
    else:
        launch(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
