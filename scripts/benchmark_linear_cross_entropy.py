#!/usr/bin/env python
"""Benchmark: linear cross entropy forward + backward on one rank, time and peak memory.

Compares `ascend_ops.linear_cross_entropy` (both modes) with eager
`F.cross_entropy(F.linear(x, w), t)` and with `torch.compile` of that, and with torch 2.13's own
`F.linear_cross_entropy` (`torch-lce`: its reference path, options=None; `torch-lce-chunked`:
its chunked path, options=LinearCrossEntropyOptions(); `torch-lce-chunked-ascend_ops`: that
path on our kernels, ascend_ops.torch_linear_cross_entropy.enable()), at (BT, H, V) =
(4096, 4096, 16000) in bfloat16 unless told otherwise, one target in 7 ignored (-100); and,
per option set (`softcap-zloss`: softcap 30 and lse_square_scale 1e-4; `smoothing-weights`:
label_smoothing 0.1 and class weights), ours (`ascend_ops-<set>`) against the plain formula
with the same options (`eager-<set>`). Where torch's bf16 matmul has no
oneDNN kernels (CPUs without AVX512, where it runs a scalar fallback:
scripts/torch_matmul_probe.py), the default baselines are `eager-fp32` and `compile-fp32`
instead, the same loss on fp32 copies of x and w (`F.linear(x.float(), w.float())`), which
is what a user of such a CPU runs; `--providers` asks for any of the six. Each provider runs in its own
process for its memory, so peak memory and compile caches do not leak between providers;
the timings come from one more process that runs the providers interleaved:

- time: p20 / p50 / p80 over --reps rounds of forward + backward, each round calling every
  provider once after one warm-up each (load from other processes hits all alike);
- peak extra memory: the larger of the forward's peak resident memory above what the
  process held before (inputs) and the backward's, minus the gradients it returns (which
  exist only there). glibc is told to map large blocks directly and give them back on
  free (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_), so resident memory follows live
  memory. (Rows measured before this rule, up to the 3-rep rows of 2026-11-30, took one
  peak over the whole step minus the gradients, which hides a forward peak under the
  backward's.)

The timing process also runs `gemms`: the step's three GEMMs alone, as the CPU kernels run
them on the engines in force (scripts/gemm_peak.py: the logits with their row statistics,
grad_input, grad_weight) on the kept rows (ascend_ops runs its GEMMs on the rows not ignored
only: training/lce/kept_rows.py; `ascend_ops-every-row`, on request, runs every row as the torch
providers do), interleaved with the providers, so `ascend_ops / gemms` is the step's
cost over its GEMMs'; then each GEMM against the register-only peak of its instruction
(VDPBF16PS, TDPBF16PS or VFMADD231PS), interleaved with it: the table's peak-fraction lines.

Rows (one per provider) are appended to scripts/results/benchmarks.csv in the schema of
scripts/results_csv.py, with the CPU model, ISA flags and CPU GEMM engine;
scripts/benchmark_tables.py makes docs/benchmarks.md's table from them. The table printed
gives each median as a ratio to ascend_ops memory-saving.

    python scripts/benchmark_linear_cross_entropy.py                     # (4096, 4096, 16000)
    python scripts/benchmark_linear_cross_entropy.py --size 1024 1024 4000 --reps 5
    python scripts/benchmark_linear_cross_entropy.py --quick             # smoke test, tiny
"""

from __future__ import annotations

import argparse
import gc
import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from benchmark import time_interleaved  # noqa: E402
from results_csv import DEFAULT_CSV, ResultRow, append_rows, machine_fields, timing_fields  # noqa: E402
from torch_matmul_probe import probe_matmul  # noqa: E402
from worker_processes import report, reset_peak_rss, run_worker, status_kb, text_table  # noqa: E402

PROVIDERS = ("ascend_ops", "ascend_ops-high-performance", "ascend_ops-every-row", "eager",
             "compile", "eager-fp32", "compile-fp32", "torch-lce", "torch-lce-chunked",
             "torch-lce-chunked-ascend_ops", "ascend_ops-softcap-zloss", "eager-softcap-zloss",
             "ascend_ops-smoothing-weights", "eager-smoothing-weights", "gemms")

#: torch's own F.linear_cross_entropy: options=None (linear + cross_entropy, full logits),
#: options=LinearCrossEntropyOptions() on torch's chunked body, and the same with our
#: kernels registered for its chunked ops (ascend_ops.torch_linear_cross_entropy).
TORCH_API = ("torch-lce", "torch-lce-chunked", "torch-lce-chunked-ascend_ops")
#: One row per option set, ours against the plain formula with the same options (eager):
#: soft-cap 30 + z-loss 1e-4 (Gemma 2 / PaLM), label smoothing 0.1 + class weights.
OPTION_SETS = {"softcap-zloss": dict(softcap=30.0, lse_square_scale=1e-4),
               "smoothing-weights": dict(label_smoothing=0.1, ce_weight=True)}
#: The torch providers the step is compared with (the summary line's "fastest torch provider").
TORCH_PROVIDERS = ("eager", "compile", "eager-fp32", "compile-fp32", "torch-lce", "torch-lce-chunked")
IGNORED = -100
IGNORE_EVERY = 7  # one target in 7 ignored (padding), as a training batch has


def default_providers() -> list[str]:
    """Ours and the baselines torch runs fastest here: bf16, or fp32 where torch's bf16
    matmul has no oneDNN kernels (scripts/torch_matmul_probe.py); where it has them, also
    torch's own F.linear_cross_entropy (with and without our kernels) and the option sets
    (their eager baselines multiply in bf16, hours on a scalar fallback)."""
    slow = probe_matmul().bf16_is_slow
    suffix = "-fp32" if slow else ""
    providers = ["ascend_ops", "ascend_ops-high-performance", "eager" + suffix, "compile" + suffix]
    if not slow:
        providers += list(TORCH_API) + [f"{side}-{name}" for name in OPTION_SETS
                                        for side in ("ascend_ops", "eager")]
    return providers + ["gemms"]


def class_weights(v: int) -> torch.Tensor:
    return 0.5 + torch.rand(v, generator=torch.Generator().manual_seed(1))


def option_set(provider: str) -> tuple[str, dict] | None:
    for name, options in OPTION_SETS.items():
        if provider.endswith(name):
            return name, options
    return None


def plain_formula(softcap=None, lse_square_scale=0.0, label_smoothing=0.0, ce_weight=False):
    """The loss with the options in plain torch (eager), what linear_cross_entropy computes."""
    def loss(x, w, t):
        logits = F.linear(x, w).float()
        if softcap is not None:
            logits = softcap * torch.tanh(logits / softcap)
        cw = class_weights(w.size(0)) if ce_weight else None
        out = F.cross_entropy(logits, t, weight=cw, label_smoothing=label_smoothing)
        if lse_square_scale:
            kept = t != IGNORED  # z-loss per kept row, as the loss (SPEC §7)
            out = out + lse_square_scale * (torch.logsumexp(logits[kept], dim=1) ** 2).mean()
        return out
    return loss


def every_row(fn):
    """`fn` with the ignored rows run as the kept ones (ascend_ops-every-row): no gathering of
    the kept rows (training/lce/kept_rows.py), so the ratio to ascend_ops is what skipping saves."""
    from ascend_ops.training.lce import kept_rows

    def run(x, w, t):
        saved, kept_rows.MIN_IGNORED_VOCAB_PER_ROW = kept_rows.MIN_IGNORED_VOCAB_PER_ROW, 2**62
        try:
            return fn(x, w, t)
        finally:
            kept_rows.MIN_IGNORED_VOCAB_PER_ROW = saved
    return run


def loss_function(provider: str):
    chosen = option_set(provider)
    if chosen is not None and provider.startswith("eager"):
        return plain_formula(**chosen[1])
    if provider.startswith("ascend_ops"):
        import ascend_ops

        if chosen is not None:
            options = dict(chosen[1])
            cw = None
            if options.pop("ce_weight", False):
                cw = "make"

            def ours(x, w, t, _options=options, _cw=cw):
                weights = class_weights(w.size(0)) if _cw else None
                return ascend_ops.linear_cross_entropy(x, w, t, ce_weight=weights, **_options)
            return ours
        mode = "high-performance" if provider.endswith("high-performance") else "memory-saving"
        if provider == "ascend_ops-every-row":
            return every_row(lambda x, w, t: ascend_ops.linear_cross_entropy(x, w, t, mode=mode))
        return lambda x, w, t: ascend_ops.linear_cross_entropy(x, w, t, mode=mode)
    if provider in TORCH_API:
        from ascend_ops import torch_linear_cross_entropy as bridge

        options = None if provider == "torch-lce" else torch.nn.LinearCrossEntropyOptions()
        ours = provider == "torch-lce-chunked-ascend_ops"

        def torch_api(x, w, t):
            # per call: the interleaved timing runs torch's body and ours in one process
            if ours:
                assert bridge.enable()
            else:
                bridge.disable()
            return F.linear_cross_entropy(x, w, t, ignore_index=IGNORED, options=options)
        return torch_api

    def eager(x, w, t):
        return F.cross_entropy(F.linear(x, w), t)

    def eager_fp32(x, w, t):
        return F.cross_entropy(F.linear(x.float(), w.float()), t)

    fn = eager_fp32 if provider.endswith("-fp32") else eager
    return torch.compile(fn) if provider.startswith("compile") else fn


def make_inputs(bt: int, h: int, v: int):
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(bt, h, generator=gen) / h**0.5).bfloat16().requires_grad_()
    w = (torch.randn(v, h, generator=gen) * 0.02).bfloat16().requires_grad_()
    t = torch.randint(0, v, (bt,), generator=gen)
    t[::IGNORE_EVERY] = IGNORED
    return x, w, t


def kept_row_count(bt: int) -> int:
    """The rows of make_inputs' batch the step's GEMMs run on: ascend_ops skips the ignored ones."""
    return bt - len(range(0, bt, IGNORE_EVERY))


def make_step(provider: str, x, w, t):
    if provider == "gemms":
        from gemm_peak import PRODUCTS, StepOperands, run_product, step_operands

        ops = step_operands(kept_row_count(x.size(0)), x.size(1), w.size(0))

        def gemms() -> None:
            for product in PRODUCTS:
                run_product(product, ops)

        return gemms
    fn = loss_function(provider)

    def step() -> None:
        fn(x, w, t).backward()
        # Dropped within the step, as optimizer.zero_grad() drops them between steps: each
        # provider pays for freeing its own gradients, and ascend_ops' weight gradient block
        # is back in its slot before the next provider runs (kept_scratch.h).
        x.grad = w.grad = None

    return step


def peak_extra_mib(provider: str, bt: int, h: int, v: int) -> float:
    """Peak extra memory of one forward + backward of `provider` (the worker side: a fresh
    process per provider, so nothing another provider allocated or compiled is counted):
    the forward's peak above the inputs, or the backward's less the gradients it returns,
    whichever is larger."""
    x, w, t = make_inputs(bt, h, v)
    if provider == "gemms":
        return 0.0  # not a loss: timed only
    fn = loss_function(provider)
    make_step(provider, x, w, t)()  # warm-up (and compilation); it drops its gradients
    gc.collect()
    # ascend_ops' step keeps its gradient cache, logits chunk and weight gradient blocks from
    # one step to the next (op_plugin/csrc/cpu/gemm/operands/kept_scratch.h): freed here, so that the
    # measured step allocates them again and they count in its peak (nothing is kept for
    # the other providers).
    from ascend_ops import _extension
    _extension.native().cpu_release_kept_scratch()
    before = status_kb("VmRSS")
    reset_peak_rss()
    loss = fn(x, w, t)
    forward_peak = status_kb("VmHWM")
    reset_peak_rss()
    loss.backward()
    backward_peak = status_kb("VmHWM")
    grads_kb = (x.grad.nbytes + w.grad.nbytes) / 1024
    return max(0.0, (forward_peak - before) / 1024, (backward_peak - before - grads_kb) / 1024)


def interleaved_times(providers: list[str], bt: int, h: int, v: int, reps: int) -> dict[str, list[float]]:
    """Seconds per forward + backward of every provider, in one process: one warm-up each,
    then `reps` rounds calling every provider once, so load from other processes on the
    machine hits all providers alike (the worker side)."""
    x, w, t = make_inputs(bt, h, v)
    times = time_interleaved({p: make_step(p, x, w, t) for p in providers}, reps)
    if "gemms" in providers:
        times["peak_fractions"] = gemm_peak_fractions(kept_row_count(bt), h, v, reps)
    return times


def gemm_peak_fractions(bt: int, h: int, v: int, rounds: int) -> list[dict]:
    """Each GEMM of the step on the engine its kind runs on here, against its instruction's
    register-only peak, interleaved (scripts/gemm_peak.py)."""
    from ascend_ops.cpu_info import gemm_engine_report
    from gemm_peak import measure_products, step_operands

    engines = gemm_engine_report().engines
    ops = step_operands(bt, h, v)
    rows = []
    for product, kind in (("logits", "fp32_out"), ("grad_input", "rounded"), ("grad_weight", "rounded")):
        r = measure_products(ops, [engines[kind]], rounds, products=(product,))[0]
        rows.append({"product": product, "engine": r.engine, "instruction": r.instruction,
                     "tflops": r.tflops, "peak_tflops": r.peak_tflops, "fraction": r.fraction})
    return rows


def measure(args) -> list[ResultRow]:
    """Peak memory per provider in its own process, then the timings interleaved in one."""
    size = ["--size", *map(str, args.size)]
    peaks = {p: run_worker(__file__, ["--worker", "memory", "--providers", p, *size], args.timeout)
             for p in args.providers if p != "gemms"}
    times = run_worker(__file__, ["--worker", "time", "--providers", *args.providers, *size,
                                  "--reps", str(args.reps)], args.timeout * len(args.providers))
    machine = machine_fields()
    measure.peak_fractions = times.pop("peak_fractions", [])
    rows = []
    for provider in args.providers:
        rows.append(ResultRow("linear_cross_entropy", provider, "forward+backward", "bfloat16",
                              "x".join(map(str, args.size)), **machine,
                              **timing_fields(times[provider], args.reps),
                              peak_extra_mib=peaks.get(provider)))
    return rows


def format_table(rows: list[ResultRow], peak_fractions: list[dict] = ()) -> str:
    base = next((r for r in rows if r.provider == "ascend_ops"), rows[0])
    header = ("provider", "p20 ms", "p50 ms", "p80 ms", "p50 / ascend_ops", "peak extra MiB")
    body = [(r.provider, f"{r.p20_s * 1e3:.1f}", f"{r.median_s * 1e3:.1f}", f"{r.p80_s * 1e3:.1f}",
             f"{r.median_s / base.median_s:.2f}",
             "-" if r.provider == "gemms" else f"{r.peak_extra_mib:.0f}") for r in rows]
    lines = [text_table(header, body)]
    torch_rows = [r for r in rows if r.provider in TORCH_PROVIDERS]
    gemms = next((r for r in rows if r.provider == "gemms"), None)
    summary = []
    if torch_rows:
        fastest = min(torch_rows, key=lambda r: r.median_s)
        summary.append(f"ascend_ops / fastest torch provider ({fastest.provider}): "
                       f"{base.median_s / fastest.median_s:.2f}x (target <= 0.9)")
    if gemms is not None:
        summary.append(f"ascend_ops / its three GEMMs (gemms): {base.median_s / gemms.median_s:.2f}x "
                       f"(target <= 1.05)")
    lines.extend(summary)
    if peak_fractions:
        lines.append(text_table(("GEMM", "engine", "instruction", "TFLOP/s", "peak TFLOP/s", "peak fraction"),
                                [(f["product"], f["engine"], f["instruction"], f"{f['tflops']:.3f}",
                                  f"{f['peak_tflops']:.3f}", f"{f['fraction']:.2f}") for f in peak_fractions]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, nargs=3, metavar=("BT", "H", "V"), default=[4096, 4096, 16000])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--providers", nargs="+", choices=PROVIDERS,
                        help="default: ours and the faster form of eager and compile here")
    parser.add_argument("--csv", type=pathlib.Path, default=DEFAULT_CSV)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per provider")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: tiny size, 2 reps, no CSV unless --csv is given")
    parser.add_argument("--worker", choices=["memory", "time"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker == "memory":
        report(peak_extra_mib(args.providers[0], *args.size))
        return 0
    if args.worker == "time":
        report(interleaved_times(args.providers, *args.size, args.reps))
        return 0
    if args.providers is None:
        args.providers = default_providers()
    if args.quick:
        args.size, args.reps = [64, 32, 300], 2
        if "--csv" not in (argv if argv is not None else sys.argv[1:]):
            args.csv = None
    bt, h, v = args.size
    print(f"linear cross entropy forward+backward, BT={bt} H={h} V={v} bfloat16, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.reps} reps; "
          f"machine: {machine_fields()}")
    rows = measure(args)
    print(format_table(rows, getattr(measure, "peak_fractions", [])))
    if args.csv:
        append_rows(args.csv, rows)
        print(f"rows appended to {args.csv}")
        if measure.peak_fractions:
            # the GEMMs ran on the kept rows: that is their size
            append_peak_rows(args.csv.parent / "gemm_peak.csv", measure.peak_fractions,
                             "x".join(map(str, (kept_row_count(bt), h, v))), args.reps)
    return 0


def append_peak_rows(path: pathlib.Path, fractions: list[dict], size: str, rounds: int) -> None:
    """The peak-fraction lines as rows of scripts/results/gemm_peak.csv (benchmark_gemm_peak.py's schema)."""
    import csv
    import datetime
    import os

    from ascend_ops.cpu_info import cpu_info
    from benchmark_gemm_peak import FIELDS

    info = cpu_info()
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        for r in fractions:
            writer.writerow({"date": datetime.date.today().isoformat(), "cpu_model": info.model,
                             "amx_bf16": int(info.amx_bf16), "avx512_bf16": int(info.avx512_bf16),
                             "threads": torch.get_num_threads(), "load_1m": round(os.getloadavg()[0], 2),
                             "product": r["product"], "size": size, "engine": r["engine"],
                             "instruction": r["instruction"], "tflops": round(r["tflops"], 4),
                             "peak_tflops": round(r["peak_tflops"], 4), "fraction": round(r["fraction"], 3),
                             "rounds": rounds, "torch": torch.__version__})


if __name__ == "__main__":
    sys.exit(main())
