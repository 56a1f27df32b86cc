#!/usr/bin/env python
"""torch's own F.linear_cross_entropy with options=LinearCrossEntropyOptions(): its chunked
body against the same call on our kernels (ascend_ops.torch_linear_cross_entropy.enable()),
each side one forward + backward in a fresh process, as a user's first training step meets it.

Pairs run in turn (torch, ours, torch, ours, ...), so load from other processes hits both
alike; each process prints its step's seconds and its peak extra memory (the step's peak
resident memory above the inputs, less the gradients it returns; glibc maps large blocks
directly: live_memory_env in scripts/worker_processes.py). The table gives the medians and the
ratios ours / torch; benchmark_linear_cross_entropy.py times the same two providers
interleaved in one process instead.

    python scripts/benchmark_torch_lce_fresh.py                    # (4096, 4096, 16000), 3 pairs
    python scripts/benchmark_torch_lce_fresh.py --size 256 128 1000 --pairs 1
"""

from __future__ import annotations

import argparse
import gc
import json
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from worker_processes import live_memory_env, reset_peak_rss, status_kb, text_table  # noqa: E402

SIDES = ("torch", "ours")
IGNORED = -100


def one_step(side: str, bt: int, h: int, v: int) -> dict:
    """The worker: one forward + backward of `side`, bfloat16, one target in 7 ignored."""
    import torch
    import torch.nn.functional as F

    if side == "ours":
        from ascend_ops import torch_linear_cross_entropy as bridge

        if not bridge.enable():
            raise RuntimeError("ascend_ops.torch_linear_cross_entropy.enable() refused: "
                               f"{bridge.status()}")
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(bt, h, generator=gen) / h**0.5).bfloat16().requires_grad_()
    w = (torch.randn(v, h, generator=gen) * 0.02).bfloat16().requires_grad_()
    t = torch.randint(0, v, (bt,), generator=gen)
    t[::7] = IGNORED
    gc.collect()
    before = status_kb("VmRSS")
    reset_peak_rss()
    start = time.perf_counter()
    loss = F.linear_cross_entropy(x, w, t, ignore_index=IGNORED,
                                  options=torch.nn.LinearCrossEntropyOptions())
    loss.backward()
    seconds = time.perf_counter() - start
    grads_kb = (x.grad.nbytes + w.grad.nbytes) / 1024
    return {"seconds": seconds, "peak_extra_mib": (status_kb("VmHWM") - before - grads_kb) / 1024,
            "loss": loss.item()}


def run_side(side: str, size: list[int], timeout: float) -> dict:
    result = subprocess.run([sys.executable, __file__, "--worker", side, "--size", *map(str, size)],
                            capture_output=True, text=True, timeout=timeout, env=live_memory_env())
    if result.returncode != 0:
        raise RuntimeError(f"the {side} worker failed:\n{result.stderr}")
    return json.loads(result.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, nargs=3, metavar=("BT", "H", "V"), default=[4096, 4096, 16000])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per process")
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(one_step(args.worker, *args.size)))
        return 0
    runs: dict[str, list[dict]] = {side: [] for side in SIDES}
    for _ in range(args.pairs):
        for side in SIDES:
            runs[side].append(run_side(side, args.size, args.timeout))
    median = {side: {key: statistics.median(r[key] for r in runs[side])
                     for key in ("seconds", "peak_extra_mib")} for side in SIDES}
    from ascend_ops.cpu_info import cpu_info, gemm_engine_report

    print(f"{cpu_info().model}; engines {gemm_engine_report().engine}; "
          f"(BT, H, V) = {tuple(args.size)} bfloat16, {args.pairs} pairs of fresh processes")
    print(text_table(("side", "step s (median)", "peak extra MiB (median)", "every step s", "loss"),
                     [(side, f"{median[side]['seconds']:.2f}", f"{median[side]['peak_extra_mib']:.0f}",
                       " ".join(f"{r['seconds']:.2f}" for r in runs[side]), f"{runs[side][0]['loss']:.6f}")
                      for side in SIDES]))
    print(f"ours / torch: {median['ours']['seconds'] / median['torch']['seconds']:.2f}x the time, "
          f"{median['ours']['peak_extra_mib'] / max(median['torch']['peak_extra_mib'], 1e-9):.2f}x "
          "the peak extra memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
