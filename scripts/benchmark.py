#!/usr/bin/env python
"""Benchmark the CPU kernels against plain torch and against their hardware floors.

For each op, mode, dtype and size, every provider runs in interleaved rounds after a
warm-up (so machine noise hits all of them alike); the row records the median and
p20/p80 of the rounds and, for FLCE, the peak extra memory of one call measured in a
fresh child process. Rows are appended to scripts/results/benchmarks.csv (a --quick run's
only to the file --csv names) in the schema of
scripts/results_csv.py (each records the CPU model, its AMX-BF16 / AVX512-BF16 flags and
the CPU GEMM engine); scripts/benchmark_tables.py turns them into docs/benchmarks.md's
tables, scripts/plot_benchmarks.py into a plot.

Providers:
  fused_linear_cross_entropy_loss_grad (bfloat16)
    ascend_ops      our CPU kernel
    torch_formula   SPEC §1 in plain torch with fp32 upcasts (ascend_ops.reference)
    gemm_floor      its bf16 GEMMs alone via torch.matmul (oneDNN, bf16 out): x @ W.T
                    (memory-saving only), G @ W, G.T @ x
    gemm_floor_fp32 instead of gemm_floor where torch's bf16 matmul has no oneDNN kernels
                    (CPUs without AVX512: scripts/torch_matmul_probe.py): the same
                    GEMMs in fp32 (IEEE) on copies made before the timing
  sync_batch_norm (float32, bfloat16; --op sync_bn): forward + backward of a layer on
  one gloo rank, and each sync-BN kernel alone (`engine` names the batch-norm loops' build)
    ascend_ops           ascend_ops.nn.SyncBatchNorm (aten's sync-BN ops, our kernels)
    ascend_ops_portable  the same with ASCEND_OPS_CPU_GEMM=portable (the portable loops)
    batch_norm2d         torch.nn.BatchNorm2d (PyTorch's own CPU kernels)
    kernel:<op>          one aten sync-BN op on the same tensors; read_floor: reading its
                         inputs once (x.sum(), + dy.sum() for the backward ops);
                         copy_floor: reading them once and writing a fresh output
                         (x.clone(), dy + x), the floor of elemt and backward elemt
  batch_norm_reduce_backward (float32, bfloat16; `engine` adds the batch-norm loops' build)
    ascend_ops      our CPU kernel
    ascend_ops_portable  the same with ASCEND_OPS_CPU_GEMM=portable (the portable loops)
    torch_formula   SPEC §2 in plain torch (fp32 upcasts)
    aten_native     aten.native_batch_norm_backward(output_mask=[False, True, True])
    read_floor      grad_out.sum() + input.sum(): reading both inputs once

    python scripts/benchmark.py                      # the full grid (minutes)
    python scripts/benchmark.py --quick              # a smoke run: prints, writes no CSV
    python scripts/benchmark.py --quick --csv /tmp/q.csv
    python scripts/benchmark.py --op sync_bn         # the SyncBatchNorm suite alone
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import torch

import ascend_ops
from ascend_ops import reference, testing
from results_csv import DEFAULT_CSV, ResultRow, append_rows, machine_fields, timing_fields
from torch_matmul_probe import probe_matmul
from worker_processes import reset_peak_rss, status_kb, worker_env

ROOT = pathlib.Path(__file__).resolve().parents[1]
FLCE = "fused_linear_cross_entropy_loss_grad"
BN = "batch_norm_reduce_backward"
MIB = 1 << 20


def time_interleaved(providers: dict, rounds: int) -> dict[str, list[float]]:
    """One warm-up call each, then `rounds` rounds calling every provider once, round r in the
    order rotated by r: a slot that runs slow (seen on AMD EPYC: the first call after the
    formula's large allocations, 2x for 3 ms calls, in some processes) then falls on each
    provider in turn, not on one, and the medians do not see it. A provider's `prepare`
    attribute, if it has one, runs untimed before each of its calls."""
    def call(run):
        getattr(run, "prepare", lambda: None)()
        start = time.perf_counter()
        run()
        return time.perf_counter() - start

    for run in providers.values():
        call(run)
    times: dict[str, list[float]] = {name: [] for name in providers}
    order = list(providers.items())
    for r in range(rounds):
        shift = r % len(order)
        for name, run in order[shift:] + order[:shift]:
            times[name].append(call(run))
    return times


# --- fused_linear_cross_entropy_loss_grad ------------------------------------------

def flce_inputs(bt: int, h: int, v: int, mode: str) -> dict:
    return testing.flce_inputs(testing.FlceCase(bt, h, v, torch.bfloat16, mode, masked_fraction=0.1))


def flce_providers(inputs: dict, mode: str, floor: str = "gemm_floor") -> dict:
    """ours, the formula and the GEMM floor named `floor` (gemm_floor: bf16 matmuls;
    gemm_floor_fp32: fp32 matmuls of the same values)."""
    x, w = inputs["input"], inputs["weight"]
    g = torch.randn(x.size(0), w.size(0)).bfloat16()  # stands for the logits gradient
    if floor == "gemm_floor_fp32":
        x, w, g = x.float(), w.float(), g.float()
    softmax = inputs["softmax"]
    kept = None if softmax is None else softmax.clone()

    def ours():
        return ascend_ops.fused_linear_cross_entropy_loss_grad(**inputs, impl="cpu")

    def formula():
        return reference.fused_linear_cross_entropy_loss_grad(**inputs)

    def gemm_floor():
        if mode == testing.MEMORY_SAVING:
            torch.matmul(x, w.T)
        torch.matmul(g, w)
        torch.matmul(g.T, x)

    if kept is not None:
        # High-performance mode may use softmax as scratch (the onednn engine writes G over
        # it): each call of ours and of the formula starts from the forward's values, restored
        # untimed.
        ours.prepare = formula.prepare = lambda: softmax.copy_(kept)

    return {"ascend_ops": ours, "torch_formula": formula, floor: gemm_floor}


def flce_peak_memory(bt: int, h: int, v: int, mode: str, provider: str, floor: str) -> float:
    """Peak extra resident memory (MiB) of one call, in a fresh child process whose resident
    memory follows its live memory and whose GEMM engines are this process's
    (worker_processes.worker_env)."""
    code = f"""
import json, sys
sys.path.insert(0, {str(ROOT / 'scripts')!r})
import benchmark, torch
torch.set_num_threads({torch.get_num_threads()})
inputs = benchmark.flce_inputs({bt}, {h}, {v}, {mode!r})
run = benchmark.flce_providers(inputs, {mode!r}, {floor!r})[{provider!r}]
print(json.dumps(benchmark.peak_extra_mib(run)))
"""
    result = subprocess.run([sys.executable, "-c", code], env=worker_env(), capture_output=True,
                            text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def peak_extra_mib(run) -> float:
    """Peak resident memory of `run()` above what was resident before it (Linux)."""
    reset_peak_rss()
    before = status_kb("VmRSS")
    run()
    return (status_kb("VmHWM") - before) / 1024


def bench_flce(sizes, rounds: int, machine: dict, memory: bool,
               modes=(testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE)) -> list[ResultRow]:
    rows = []
    probe = probe_matmul()
    floor = "gemm_floor_fp32" if probe.bf16_is_slow else "gemm_floor"
    print(f"GEMM floor: {floor} ({probe.describe()})")
    for bt, h, v in sizes:
        for mode in modes:
            inputs = flce_inputs(bt, h, v, mode)
            times = time_interleaved(flce_providers(inputs, mode, floor), rounds)
            outputs_mib = (bt * h + v * h) * 2 / MIB
            for provider, samples in times.items():
                row = ResultRow(FLCE, provider, mode, "bfloat16", f"{bt}x{h}x{v}", **machine,
                                **timing_fields(samples, rounds), outputs_mib=outputs_mib)
                if provider == "ascend_ops":
                    row.budget_mib = bt * v * 2 / MIB  # the target: half the fp32 logits
                if memory:
                    row.peak_extra_mib = flce_peak_memory(bt, h, v, mode, provider, floor)
                rows.append(row)
                print_row(row)
            del inputs
    return rows


# --- batch_norm_reduce_backward ----------------------------------------------------

def bn_providers(shape, dtype) -> dict:
    inputs = testing.bn_inputs(testing.BnCase(shape, dtype, torch.float32, seed=1))
    dy, x, mean, invstd, weight = (inputs[k] for k in ("grad_out", "input", "mean", "invstd", "weight"))
    dims = [d for d in range(x.dim()) if d != 1]
    per_channel = [1, -1] + [1] * (x.dim() - 2)

    def ours():
        return ascend_ops.batch_norm_reduce_backward(dy, x, mean, invstd, weight, True, True, True,
                                                     impl="cpu")

    def formula():
        d = dy.float()
        sum_dy_xmu = (d * (x.float() - mean.view(per_channel))).sum(dims)
        return d.sum(dims), sum_dy_xmu, sum_dy_xmu * invstd

    def aten_native():  # mixed types as PyTorch's own CPU BN takes them: fp32 parameters
        return torch.ops.aten.native_batch_norm_backward(
            dy, x, weight, None, None, mean, invstd, True, 1e-5, [False, True, True])

    def read_floor():
        return dy.sum(), x.sum()

    return {"ascend_ops": ours, "ascend_ops_portable": portable(ours), "torch_formula": formula,
            "aten_native": aten_native, "read_floor": read_floor}


def bench_bn(shapes, dtypes, rounds: int, machine: dict) -> list[ResultRow]:
    # `engine`: the GEMM engines (unused here) and the batch-norm loops' build, one value
    # for the whole run so the providers of a shape stay one group in the tables
    engine = f"{machine['engine']} bn_loops={ascend_ops._C.cpu_batch_norm_engine()}"
    rows = []
    for shape in shapes:
        for dtype in dtypes:
            times = time_interleaved(bn_providers(shape, dtype), rounds)
            for provider, samples in times.items():
                fields = {**machine, "engine": engine}
                row = ResultRow(BN, provider, "reduce", str(dtype).removeprefix("torch."),
                                "x".join(map(str, shape)), **fields, **timing_fields(samples, rounds))
                rows.append(row)
                print_row(row)
    return rows


# --- SyncBatchNorm (the sync-BN kernel family) ----------------------------------------

SYNC_BN = "sync_batch_norm"


def one_gloo_rank() -> None:
    """A world of one gloo process, as a single-rank SyncBatchNorm job runs."""
    import torch.distributed as dist

    if not dist.is_initialized():
        with socket.socket() as s:  # a free port: other jobs may share the machine
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


def portable(run):
    """`run` on the portable loops (the switch is read per kernel call)."""
    def wrapped():
        saved = os.environ.get("ASCEND_OPS_CPU_GEMM")
        os.environ["ASCEND_OPS_CPU_GEMM"] = "portable"
        try:
            return run()
        finally:
            if saved is None:
                del os.environ["ASCEND_OPS_CPU_GEMM"]
            else:
                os.environ["ASCEND_OPS_CPU_GEMM"] = saved
    return wrapped


def sync_bn_layer_providers(shape, dtype) -> dict:
    """Forward + backward of one layer in training mode, ours and nn.BatchNorm2d."""
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=gen) * 2 + 1).to(dtype).requires_grad_()
    dy = torch.randn(shape, generator=gen).to(dtype)
    ours = ascend_ops.nn.SyncBatchNorm(shape[1], dtype=dtype)
    theirs = torch.nn.BatchNorm2d(shape[1], dtype=dtype)

    def step(layer):
        def run():
            x.grad = None
            layer(x).backward(dy)
        return run

    return {"ascend_ops": step(ours), "ascend_ops_portable": portable(step(ours)),
            "batch_norm2d": step(theirs)}


def sync_bn_kernel_providers(shape, dtype) -> dict:
    """Each aten sync-BN op alone, and the floor: reading its inputs once."""
    gen = torch.Generator().manual_seed(1)
    x = (torch.randn(shape, generator=gen) * 2 + 1).to(dtype)
    dy = torch.randn(shape, generator=gen).to(dtype)
    c = shape[1]
    mean, invstd = torch.batch_norm_stats(x, 1e-5)
    weight, bias = torch.ones(c, dtype=dtype), torch.zeros(c, dtype=dtype)
    sum_dy, sum_dy_xmu, _, _ = torch.batch_norm_backward_reduce(dy, x, mean, invstd, weight, True, False, False)
    count = torch.tensor([x.numel() // c], dtype=torch.int32)
    return {
        "kernel:batch_norm_stats": lambda: torch.batch_norm_stats(x, 1e-5),
        "kernel:batch_norm_elemt": lambda: torch.batch_norm_elemt(x, weight, bias, mean, invstd, 1e-5),
        "kernel:batch_norm_backward_reduce": lambda: torch.batch_norm_backward_reduce(
            dy, x, mean, invstd, weight, True, True, True),
        "kernel:batch_norm_backward_elemt": lambda: torch.batch_norm_backward_elemt(
            dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count),
        "read_floor:x": lambda: x.sum(),
        "read_floor:dy+x": lambda: (dy.sum(), x.sum()),
        # read once and write a fresh output of the same size, as elemt and backward
        # elemt must (a fresh output > 32 MiB is new pages from the OS every call)
        "copy_floor:x": lambda: x.clone(),
        "copy_floor:dy+x": lambda: torch.add(dy, x),
    }


def bench_sync_bn(shapes, dtypes, rounds: int, machine: dict) -> list[ResultRow]:
    one_gloo_rank()
    engine_ours = f"ascend_ops {ascend_ops._C.cpu_batch_norm_engine()}"
    engines = {"ascend_ops_portable": "ascend_ops portable", "batch_norm2d": "aten",
               "read_floor:x": "aten", "read_floor:dy+x": "aten", "copy_floor:x": "aten",
               "copy_floor:dy+x": "aten"}
    rows = []
    for shape in shapes:
        for dtype in dtypes:
            for mode, providers in (("fwd+bwd", sync_bn_layer_providers(shape, dtype)),
                                    ("kernels", sync_bn_kernel_providers(shape, dtype))):
                times = time_interleaved(providers, rounds)
                for provider, samples in times.items():
                    # `engine`: the batch-norm loops' build here (no GEMM runs), or aten
                    fields = {**machine, "engine": engines.get(provider, engine_ours)}
                    row = ResultRow(SYNC_BN, provider, mode, str(dtype).removeprefix("torch."),
                                    "x".join(map(str, shape)), **fields,
                                    **timing_fields(samples, rounds))
                    rows.append(row)
                    print_row(row)
                del providers
    return rows


def print_row(row: ResultRow) -> None:
    memory = "" if row.peak_extra_mib is None else f"  peak +{row.peak_extra_mib:.0f} MiB"
    print(f"{row.op[:24]:<24} {row.mode:<16} {row.dtype:<8} {row.size:<18} {row.provider:<14} "
          f"median {row.median_s * 1e3:9.2f} ms  (p20 {row.p20_s * 1e3:.2f}, p80 {row.p80_s * 1e3:.2f})"
          f"{memory}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, two rounds: a smoke run")
    parser.add_argument("--csv", type=pathlib.Path,
                        help=f"CSV to append to (default: {DEFAULT_CSV.relative_to(ROOT)}; "
                             "a --quick run writes none unless this is given)")
    parser.add_argument("--rounds", type=int, help="timed rounds per provider")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--op", choices=["flce", "bn", "sync_bn"], action="append", help="only this op")
    parser.add_argument("--no-memory", action="store_true", help="skip the child-process memory runs")
    parser.add_argument("--flce-size", type=int, nargs=3, action="append", metavar=("BT", "H", "V"),
                        help="only this FLCE size (repeatable)")
    parser.add_argument("--flce-mode", choices=[testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE],
                        action="append", help="only this FLCE mode (repeatable)")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    if not ascend_ops.available_impls()["cpu"].available:
        print(f"cpu: {ascend_ops.available_impls()['cpu'].reason}", file=sys.stderr)
        return 2
    machine = machine_fields()
    ops = args.op or ["flce", "bn", "sync_bn"]
    if args.quick:
        flce_sizes, bn_shapes, rounds = [(64, 32, 300)], [(4, 8, 6, 6)], args.rounds or 2
        sync_bn_shapes = [(4, 8, 6, 6)]
    else:
        flce_sizes = [(1024, 1024, 8192), (2048, 2048, 16384), (4096, 4096, 16000)]
        bn_shapes = [(64, 64, 112, 112), (32, 256, 28, 28), (8, 2048, 7, 7)]
        sync_bn_shapes = [(32, 256, 28, 28), (16, 64, 112, 112), (64, 64, 112, 112)]
        rounds = args.rounds or 5
    if args.flce_size:
        flce_sizes = [tuple(size) for size in args.flce_size]
    print(f"machine: {machine}; torch {torch.__version__}")
    rows = []
    if "flce" in ops:
        modes = args.flce_mode or [testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE]
        rows += bench_flce(flce_sizes, rounds, machine, memory=not args.no_memory, modes=modes)
    if "bn" in ops:
        rows += bench_bn(bn_shapes, [torch.float32, torch.bfloat16], rounds, machine)
    if "sync_bn" in ops:
        rows += bench_sync_bn(sync_bn_shapes, [torch.float32, torch.bfloat16], rounds, machine)
    csv_path = output_csv(args.csv, args.quick)
    if csv_path is None:
        print(f"{len(rows)} rows measured; a --quick run appends them only to a --csv file")
        return 0
    append_rows(csv_path, rows)
    print(f"appended {len(rows)} rows to {csv_path}")
    return 0


def output_csv(given: pathlib.Path | None, quick: bool) -> pathlib.Path | None:
    """Where the rows go: the --csv file; else the committed results for a full run, and
    nowhere for a --quick one (a smoke run's tiny sizes must not join the tables)."""
    if given is not None:
        return given
    return None if quick else DEFAULT_CSV


if __name__ == "__main__":
    sys.exit(main())
