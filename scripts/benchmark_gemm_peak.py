#!/usr/bin/env python
"""Benchmark: each GEMM of the training step against the register-only peak of its instruction.

For every engine the CPU kernels offer and each product of linear_cross_entropy's step (the
logits with their row max / sum-of-exp epilogue, grad_input, grad_weight; scripts/gemm_peak.py
says how each is run), at (BT, H, V) = (2048, 2048, 16384) and (4096, 4096, 16000) in bfloat16:
TFLOP/s, the peak of the instruction it multiplies with (VDPBF16PS zmm, TDPBF16PS where AMX
exists, VFMADD231PS zmm / ymm for fp32 GEMMs) on the kernels' threads, and the fraction. The
products and engines alternate in rounds, and every timing sits between two runs of the peak
loop, so load from other processes hits the product and its peak alike; each figure is a
median over the rounds. First the peak loops themselves, for every instruction this CPU runs.

Rows (CPU, thread count, load, engine, instruction, product, size, TFLOP/s, peak, fraction)
are appended to scripts/results/gemm_peak.csv.

    python scripts/benchmark_gemm_peak.py                         # both sizes, every engine
    python scripts/benchmark_gemm_peak.py --sizes 1024,1024,4096 --engines avx512bf16 --rounds 3
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import pathlib
import statistics
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
    rows = []
    for instruction, _ in _C.cpu_peak_loops():
        runs = [peak_tflops(instruction) for _ in range(rounds)]
        rows.append((instruction, f"{statistics.median(runs):.3f}", f"{min(runs):.3f}-{max(runs):.3f}"))
    return text_table(("instruction", "TFLOP/s (median)", "range"), rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["2048,2048,16384", "4096,4096,16000"],
                        help="BT,H,V triples")
    parser.add_argument("--engines", nargs="+", default=None,
                        help="default: every bfloat16 engine but portable")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--csv", type=pathlib.Path, default=CSV)
    parser.add_argument("--no-csv", action="store_true")
    args = parser.parse_args(argv)
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
