#!/usr/bin/env python
"""Benchmark: one training step (forward + backward) of a tiny Hugging Face Llama, unpatched
against patched by ascend_ops.integrations.transformers.apply: peak memory and step time.

The model is tiny (hidden 64, 2 layers) and the vocabulary real-sized (V = 32000), so the
step is dominated by what the patch changes: the [B, T, V] logits, their float32 copy in
Transformers' loss and their gradients. B = 4, T = 1024 unless told otherwise; bfloat16
and float32 weights (--dtypes; a float32 model's patched head runs in float32). Providers:
unpatched, patched in each mode, and both torch.compile'd ("-compiled": the compiled
model's steps, compiled in the warm-up). Measured as scripts/benchmark_linear_cross_entropy.py measures (and with its
helpers): each provider's peak extra memory in a fresh process (the forward's peak resident
memory above what the process held before, or the backward's less the gradients, whichever
is larger; glibc told to give large blocks back on free), then the step times of both
providers interleaved in one more process, p20 / p50 / p80 over --reps rounds.

Rows are appended to scripts/results/hf_integration.csv (scripts/results_csv.py's schema,
with the CPU class and GEMM engine); the table printed gives each provider's ratio to the
unpatched model.

    python scripts/benchmark_hf_integration.py                 # B=4 T=1024 V=32000
    python scripts/benchmark_hf_integration.py --quick         # smoke test, tiny, no CSV
"""

from __future__ import annotations

import argparse
import gc
import os
import pathlib
import sys

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from benchmark import time_interleaved  # noqa: E402
from results_csv import RESULTS, ResultRow, append_rows, machine_fields, timing_fields  # noqa: E402
from worker_processes import report, reset_peak_rss, run_worker, status_kb, text_table  # noqa: E402

PROVIDERS = ("transformers", "ascend_ops", "ascend_ops-high-performance",
             "transformers-compiled", "ascend_ops-compiled")
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}
DEFAULT_CSV = RESULTS / "hf_integration.csv"
HIDDEN = 64


def make_model(provider: str, vocab: int, dtype: str = "bfloat16"):
    """The same randomly initialised Llama for every provider (seeded), patched or not,
    compiled or not."""
    import transformers

    import ascend_ops.integrations.transformers as aot

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=HIDDEN, intermediate_size=4 * HIDDEN, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
        tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(config).to(DTYPES[dtype]).train()
    if provider.startswith("ascend_ops"):
        mode = "high-performance" if provider.endswith("high-performance") else "memory-saving"
        aot.apply(model, mode=mode)
    if provider.endswith("-compiled"):
        model = torch.compile(model)
    return model


def make_batch(b: int, t: int, vocab: int):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (b, t), generator=gen)
    return ids, ids.clone()


def step_function(model, ids, labels):
    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=labels).loss.backward()

    return step


def peak_extra_mib(provider: str, dtype: str, b: int, t: int, vocab: int) -> float:
    """The worker side of the memory measurement, in a fresh process per provider."""
    model = make_model(provider, vocab, dtype)
    ids, labels = make_batch(b, t, vocab)
    step_function(model, ids, labels)()  # warm-up
    model.zero_grad(set_to_none=True)
    gc.collect()
    before = status_kb("VmRSS")
    reset_peak_rss()
    loss = model(input_ids=ids, labels=labels).loss
    forward_peak = status_kb("VmHWM")
    reset_peak_rss()
    loss.backward()
    backward_peak = status_kb("VmHWM")
    grads_kb = sum(p.grad.nbytes for p in model.parameters() if p.grad is not None) / 1024
    return max(0.0, (forward_peak - before) / 1024, (backward_peak - before - grads_kb) / 1024)


def interleaved_times(providers: list[str], dtype: str, b: int, t: int, vocab: int,
                      reps: int) -> dict[str, list[float]]:
    ids, labels = make_batch(b, t, vocab)
    steps = {p: step_function(make_model(p, vocab, dtype), ids, labels) for p in providers}
    for step in steps.values():  # a compiled model compiles here, not in the first round
        step()
    return time_interleaved(steps, reps)


def measure(args) -> list[ResultRow]:
    size = ["--size", *map(str, args.size)]
    machine = machine_fields()
    b, t, v = args.size
    rows = []
    for dtype in args.dtypes:
        where = ["--dtypes", dtype, *size]
        peaks = {p: run_worker(__file__, ["--worker", "memory", "--providers", p, *where],
                               args.timeout)
                 for p in args.providers}
        times = run_worker(__file__, ["--worker", "time", "--providers", *args.providers,
                                      *where, "--reps", str(args.reps)],
                           args.timeout * len(args.providers))
        rows += [ResultRow("hf_llama_train_step", p, "forward+backward", dtype,
                           f"{b}x{t}x{HIDDEN}x{v}", **machine, **timing_fields(times[p], args.reps),
                           peak_extra_mib=peaks[p])
                 for p in args.providers]
    return rows


def format_table(rows: list[ResultRow]) -> str:
    """Each row against the unpatched eager model of its dtype."""
    header = ("provider", "dtype", "p50 ms", "p50 / transformers", "peak extra MiB",
              "peak / transformers")
    body = []
    for r in rows:
        same = [q for q in rows if q.dtype == r.dtype]
        base = next((q for q in same if q.provider == "transformers"), same[0])
        # below 1 MiB (a --quick run) a peak ratio says nothing
        peak_ratio = f"{r.peak_extra_mib / base.peak_extra_mib:.2f}" \
            if base.peak_extra_mib >= 1 else "-"
        body.append((r.provider, r.dtype, f"{r.median_s * 1e3:.0f}",
                     f"{r.median_s / base.median_s:.2f}", f"{r.peak_extra_mib:.0f}", peak_ratio))
    return text_table(header, body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, nargs=3, metavar=("B", "T", "V"),
                        default=[4, 1024, 32000])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--providers", nargs="+", choices=PROVIDERS, default=list(PROVIDERS))
    parser.add_argument("--dtypes", nargs="+", choices=list(DTYPES), default=list(DTYPES),
                        help="the model's weights (each dtype a separate set of rows)")
    parser.add_argument("--csv", type=pathlib.Path, default=DEFAULT_CSV)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per provider")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: tiny size, 2 reps, no CSV unless --csv is given")
    parser.add_argument("--worker", choices=["memory", "time"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker == "memory":
        report(peak_extra_mib(args.providers[0], args.dtypes[0], *args.size))
        return 0
    if args.worker == "time":
        report(interleaved_times(args.providers, args.dtypes[0], *args.size, args.reps))
        return 0
    if args.quick:
        args.size, args.reps = [2, 16, 300], 2
        if "--csv" not in (argv if argv is not None else sys.argv[1:]):
            args.csv = None
    b, t, v = args.size
    print(f"tiny Llama training step, B={b} T={t} H={HIDDEN} V={v} {' and '.join(args.dtypes)}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.reps} reps; "
          f"machine: {machine_fields()}")
    rows = measure(args)
    print(format_table(rows))
    if args.csv:
        append_rows(args.csv, rows)
        print(f"rows appended to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
