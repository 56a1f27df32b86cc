#!/usr/bin/env python
"""Benchmark: each GEMM of the training step against the register-only peak of its instruction.

For every engine the CPU kernels offer and each product of linear_cross_entropy's step (the
logits with their row max / sum-of-exp epilogue, grad_input, grad_weight; scripts/gemm_peak.py
says how each is run), at (BT, H, V) = (2048, 2048, 16384) and (4096, 4096, 16000) in bfloat16:
TFLOP/s, the peak of the instruction it multiplies with (VDPBF16PS zmm, TDPBF16PS where AMX
exists, VFMADD231PS zmm / ymm for fp32 GEMMs) on the kernels' threads, and the fraction. The
products and engines alternate in rounds, and every timing sits between two runs of the peak
loop, so load from other processes hits the product and its peak alike; each figure is a
median over the rounds. First the peak loops themselves, for every instruction this CPU runs,
each beside its `_from_l1` twin where an own kernel multiplies with it (that kernel's inner
loop on operands in L1), and each twin's fraction of its register-only loop: the ceiling of
that kernel's GEMMs here (on AMX, of any GEMM).

Rows (CPU, thread count, load, engine, instruction, product, size, TFLOP/s, peak, fraction)
are appended to scripts/results/gemm_peak.csv.

    python scripts/benchmark_gemm_peak.py                         # both sizes, every engine
    python scripts/benchmark_gemm_peak.py --sizes 1024,1024,4096 --engines avx512bf16 --rounds 3
    python scripts/benchmark_gemm_peak.py --choice      # the engine choice, quiet and loaded

--choice measures the engines as a first bfloat16 GEMM does (engine_choice.h: one thread, its CPU
time, alternated rounds, medians) `--rounds` times as the machine is, then as many times
beside a load this script starts (two busy processes per kernel thread, each multiplying
fp32 matrices on one thread), and prints every measurement's timings and choice per kind.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import pathlib
import statistics
import subprocess
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gemm_peak import machine_description, measure_products, peak_tflops, step_operands  # noqa: E402
from worker_processes import text_table  # noqa: E402

from ascend_ops import _C  # noqa: E402
from ascend_ops.cpu_info import cpu_info  # noqa: E402

CSV = pathlib.Path(__file__).resolve().parent / "results" / "gemm_peak.csv"
FIELDS = ["date", "cpu_model", "amx_bf16", "avx512_bf16", "threads", "load_1m", "product", "size",
          "engine", "instruction", "tflops", "peak_tflops", "fraction", "rounds", "torch"]


def peak_table(rounds: int) -> str:
    rows, medians = [], {}
    for instruction, _ in _C.cpu_peak_loops():
        runs = [peak_tflops(instruction) for _ in range(rounds)]
        medians[instruction] = statistics.median(runs)
        rows.append((instruction, f"{medians[instruction]:.3f}", f"{min(runs):.3f}-{max(runs):.3f}"))
    lines = [text_table(("instruction", "TFLOP/s (median)", "range"), rows)]
    # a GEMM loads its operands, so no GEMM of a kernel passes its twin's ratio
    for twin, median in medians.items():
        if twin.endswith("_from_l1"):
            loop = twin.removesuffix("_from_l1")
            lines.append(f"{twin} / {loop} = {median / medians[loop]:.2f}: the highest fraction "
                         "that kernel's GEMMs can reach on this CPU (their operands loaded from L1)")
    return "\n".join(lines)


def busy_processes(count: int) -> list[subprocess.Popen]:
    loop = ("import torch\ntorch.set_num_threads(1)\na = torch.randn(512, 512)\n"
            "while True:\n    a = (a @ a).clamp_(-1, 1)\n")
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(count)]


def choice_runs(rounds: int) -> int:
    """The engine choice measured `rounds` times quiet and `rounds` times loaded; 1 if any
    choice differs."""
    engines = list(_C.cpu_gemm_engines())
    choices = {}
    rows = []
    for start in ("as is", "loaded"):
        load = busy_processes(2 * torch.get_num_threads()) if start == "loaded" else []
        try:
            for r in range(rounds):
                for kind in ("fp32_out", "rounded"):
                    timings = _C.cpu_gemm_measure(kind)
                    chosen = _C.cpu_gemm_choice(kind, engines, timings)
                    choices.setdefault(kind, set()).add(chosen)
                    rows.append((start, f"{os.getloadavg()[0]:.1f}", kind, chosen,
                                 " ".join(f"{e}={t:.3f}" for e, t in timings)))
        finally:
            for process in load:
                process.kill()
                process.wait()
    print(text_table(("start", "load 1m", "kind", "chosen", "TFLOP/s (one thread x threads)"), rows))
    same = all(len(c) == 1 for c in choices.values())
    print("same choice in every measurement: " + ("yes" if same else f"no: {choices}"))
    return 0 if same else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["2048,2048,16384", "4096,4096,16000"],
                        help="BT,H,V triples")
    parser.add_argument("--engines", nargs="+", default=None,
                        help="default: every bfloat16 engine but portable")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--csv", type=pathlib.Path, default=CSV)
    parser.add_argument("--no-csv", action="store_true")
    parser.add_argument("--choice", action="store_true",
                        help="measure the engine choice quiet and under a load started here")
    args = parser.parse_args(argv)
    if args.choice:
        print(f"GEMM engine choice: {machine_description()}; torch {torch.__version__}")
        return choice_runs(args.rounds)
    engines = args.engines or [e for e in _C.cpu_gemm_engines() if e != "portable"]
    print(f"GEMM peak fractions: {machine_description()}; torch {torch.__version__}")
    print(peak_table(args.rounds))
    info = cpu_info()
    out = []
    for size in args.sizes:
        bt, h, v = map(int, size.split(","))
        rows = measure_products(step_operands(bt, h, v), engines, args.rounds)
        print(f"\n(BT, H, V) = ({bt}, {h}, {v}), {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
        print(text_table(("product", "engine", "instruction", "TFLOP/s", "peak TFLOP/s", "fraction"),
                         [(r.product, r.engine, r.instruction, f"{r.tflops:.3f}", f"{r.peak_tflops:.3f}",
                           f"{r.fraction:.2f}") for r in rows]))
        for r in rows:
            out.append({"date": datetime.date.today().isoformat(), "cpu_model": info.model,
                        "amx_bf16": int(info.amx_bf16), "avx512_bf16": int(info.avx512_bf16),
                        "threads": torch.get_num_threads(), "load_1m": round(os.getloadavg()[0], 2),
                        "product": r.product, "size": r.size, "engine": r.engine,
                        "instruction": r.instruction, "tflops": round(r.tflops, 4),
                        "peak_tflops": round(r.peak_tflops, 4), "fraction": round(r.fraction, 3),
                        "rounds": r.rounds, "torch": torch.__version__})
    if not args.no_csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        new = not args.csv.exists()
        with args.csv.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            if new:
                writer.writeheader()
            writer.writerows(out)
        print(f"\nrows appended to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
