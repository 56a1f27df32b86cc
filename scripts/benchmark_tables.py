#!/usr/bin/env python
"""Regenerate the tables of docs/benchmarks.md from the committed benchmark CSV, so every
figure there has its data in scripts/results/.

Each table sits between `<!-- table:NAME -->` and `<!-- /table:NAME -->` in the markdown;
everything outside the markers is left alone. Tables use the newest row per key
(scripts/results_csv.py) and show one block per CPU class (model, AMX-BF16,
AVX512-BF16), thread count and GEMM engine. Ratios are between rows of one machine and
day (each provider's newest); the linear cross entropy table's `against` is between rows of
one run (results_csv.py's `run`; for rows written before it was recorded, of one day).

    python scripts/benchmark_tables.py            # rewrite docs/benchmarks.md
    python scripts/benchmark_tables.py --check    # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import re
import sys
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from results_csv import DEFAULT_CSV, newest, newest_rows, read_rows  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
FLCE = "fused_linear_cross_entropy_loss_grad"
BN = "batch_norm_reduce_backward"
LCE = "linear_cross_entropy"


def cpu_class(row: dict) -> str:
    flags = [name for name in ("amx_bf16", "avx512_bf16") if row[name] == "1"]
    return f"{row['cpu_model']} ({', '.join(flags) or 'no bf16 ISA'}), {row['threads']} thr"


def size_key(size: str) -> tuple[int, ...]:
    return tuple(int(part) for part in size.split("x"))


def seconds(value: str) -> str:
    s = float(value)
    if s >= 1.0:
        return f"{s * 1e3:.0f} ms"
    return f"{s * 1e3:.1f} ms" if s >= 0.01 else f"{s * 1e3:.2f} ms"


def mib(value: str) -> str:
    return f"{float(value):.0f} MiB" if value else "–"


def measured(row: dict) -> str:
    """Date and, where recorded, the machine's load (a load above the thread count means
    other processes competed for the cores: expect slower, noisier figures)."""
    load = row.get("load_1m") or ""
    return f"{row['date']}, load {float(load):.1f}" if load else row["date"]


def markdown(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def grouped(rows: list[dict], op: str, *fields: str) -> dict[tuple, dict[str, dict]]:
    """{(CPU class, engine, *fields, date): {provider: row}} for the rows of `op`."""
    groups: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        if row["op"] == op:
            key = (cpu_class(row), row["engine"], *(row[f] for f in fields), row["date"])
            groups[key][row["provider"]] = row
    return groups


def flce_table(rows: list[dict]) -> str:
    body = []
    groups = grouped(rows, FLCE, "size", "mode")
    ordered = sorted(groups.items(),
                     key=lambda kv: (kv[0][0], kv[0][1], size_key(kv[0][2]), kv[0][3] != "memory-saving",
                                     kv[0][4]))
    for (cpu, engine, size, mode, _), by in ordered:
        # the bf16 floor, or the fp32 one where torch's bf16 matmul is a fallback (benchmark.py)
        floor_provider = next((p for p in ("gemm_floor", "gemm_floor_fp32") if p in by), None)
        if floor_provider is None or not {"ascend_ops", "torch_formula"} <= by.keys():
            continue
        ours, floor, torch_ = (float(by[p]["median_s"]) for p in ("ascend_ops", floor_provider, "torch_formula"))
        floor_label = seconds(by[floor_provider]["median_s"]) + (" (fp32)" if floor_provider.endswith("fp32") else "")
        # The memory target (issue 20): the outputs plus half of the fp32 [BT, V] logits.
        bt, _, v = (int(d) for d in size.split("x"))
        outputs = by["ascend_ops"]["outputs_mib"]
        limit = f"{float(outputs) + bt * v * 2 / 2**20:.0f} MiB" if outputs else "–"
        body.append([cpu, engine, size.replace("x", ", "), mode, seconds(by["ascend_ops"]["median_s"]),
                     floor_label, f"{ours / floor:.2f}×",
                     seconds(by["torch_formula"]["median_s"]), f"{torch_ / ours:.2f}×",
                     mib(by["ascend_ops"]["peak_extra_mib"]), limit, measured(by["ascend_ops"])])
    return markdown(["CPU", "engine", "(BT, H, V)", "mode", "ours", "GEMM floor", "ours / floor",
                     "plain torch", "torch / ours", "peak extra", "target", "measured"], body)


def bn_table(rows: list[dict]) -> str:
    body = []
    groups = grouped(rows, BN, "size", "dtype")
    def order(item):  # per CPU: largest shape first, float32 before bfloat16
        (cpu, _, size, dtype, date), _by = item
        work = 1
        for part in size_key(size):
            work *= part
        return cpu, -work, dtype != "float32", date

    for (cpu, engine, size, dtype, _), by in sorted(groups.items(), key=order):
        if not {"ascend_ops", "aten_native", "read_floor", "torch_formula"} <= by.keys():
            continue
        ours, aten, floor, torch_ = (float(by[p]["median_s"]) for p in
                                     ("ascend_ops", "aten_native", "read_floor", "torch_formula"))
        # the batch-norm loops' build, where the row says (rows since 2026-12-03)
        loops = engine.split("bn_loops=")[1] if "bn_loops=" in engine else "–"
        portable = (f"{float(by['ascend_ops_portable']['median_s']) / aten:.2f}×"
                    if "ascend_ops_portable" in by else "–")
        body.append([cpu, size.replace("x", "×"), dtype, loops, seconds(by["ascend_ops"]["median_s"]),
                     seconds(by["aten_native"]["median_s"]), f"{ours / aten:.2f}×",
                     seconds(by["read_floor"]["median_s"]), f"{ours / floor:.2f}×",
                     f"{torch_ / ours:.1f}×", portable])
    return markdown(["CPU", "shape", "dtype", "loops", "ours", "aten native", "ours / aten", "read floor",
                     "ours / floor", "plain torch / ours", "portable loops / aten"], body)


SYNC_BN = "sync_batch_norm"


def work(size: str) -> int:
    n = 1
    for part in size_key(size):
        n *= part
    return n


def sync_bn_groups(rows: list[dict]) -> list[tuple[tuple, dict[str, dict]]]:
    """[((CPU class, size, dtype, mode, date), {provider: row})] of the SyncBatchNorm rows,
    per CPU class (its thread count included) the most threads first, then by size. Not
    keyed by engine: a run's providers name different ones (ours, its portable build, aten)."""
    groups: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        if row["op"] == SYNC_BN:
            key = (cpu_class(row), row["size"], row["dtype"], row["mode"], row["date"])
            groups[key][row["provider"]] = row
    def order(item):
        (cpu, size, dtype, mode, date), by = item
        threads = int(next(iter(by.values()))["threads"])
        return cpu.rsplit(",", 1)[0], -threads, work(size), dtype != "float32", date
    return sorted(groups.items(), key=order)


def sync_bn_layer_table(rows: list[dict]) -> str:
    """Forward + backward of one layer: ours (and its portable build) against BatchNorm2d."""
    body = []
    for (cpu, size, dtype, mode, _), by in sync_bn_groups(rows):
        if mode != "fwd+bwd" or not {"ascend_ops", "ascend_ops_portable", "batch_norm2d"} <= by.keys():
            continue
        ours, portable, bn2d = (float(by[p]["median_s"]) for p in
                                ("ascend_ops", "ascend_ops_portable", "batch_norm2d"))
        body.append([cpu, size.replace("x", "×"), dtype, by["ascend_ops"]["engine"],
                     seconds(by["ascend_ops"]["median_s"]), seconds(by["batch_norm2d"]["median_s"]),
                     f"{ours / bn2d:.2f}×", seconds(by["ascend_ops_portable"]["median_s"]),
                     f"{portable / bn2d:.2f}×", measured(by["ascend_ops"])])
    return markdown(["CPU", "shape", "dtype", "engine", "ours", "BatchNorm2d", "ours / BN2d",
                     "portable", "portable / BN2d", "measured"], body)


# Each kernel against its floor: reading its inputs once (stats, backward_reduce), or
# reading them and writing a fresh output (elemt, backward_elemt).
SYNC_BN_FLOORS = {"stats": "read_floor:x", "elemt": "copy_floor:x",
                  "backward_reduce": "read_floor:dy+x", "backward_elemt": "copy_floor:dy+x"}


def sync_bn_kernel_table(rows: list[dict]) -> str:
    body = []
    for (cpu, size, dtype, mode, _), by in sync_bn_groups(rows):
        if mode != "kernels":
            continue
        cells = []
        for kernel, floor in SYNC_BN_FLOORS.items():
            ours, base = by.get(f"kernel:batch_norm_{kernel}"), by.get(floor)
            if ours is None or base is None:
                cells.append("–")
                continue
            o, b = float(ours["median_s"]), float(base["median_s"])
            cells.append(f"{o * 1e3:.2f} / {b * 1e3:.2f} ms = {o / b:.2f}×")
        body.append([cpu, size.replace("x", "×"), dtype, *cells])
    return markdown(["CPU", "shape", "dtype", "stats / read x", "elemt / copy x",
                     "backward_reduce / read dy+x", "backward_elemt / (dy + x)"], body)


LCE_PROVIDERS = {"ascend_ops": "ascend_ops (memory-saving)",
                 "ascend_ops-high-performance": "ascend_ops (high-performance)",
                 "ascend_ops-every-row": "ascend_ops (memory-saving), ignored rows run too",
                 "eager": "eager `F.cross_entropy(F.linear(...))`", "compile": "`torch.compile` of eager",
                 "eager-fp32": "eager on fp32 copies `F.linear(x.float(), w.float())`",
                 "compile-fp32": "`torch.compile` of eager on fp32 copies",
                 "torch-lce": "torch's `F.linear_cross_entropy`, options=None",
                 "torch-lce-chunked": "torch's `F.linear_cross_entropy`, chunked (its own body)",
                 "torch-lce-chunked-ascend_ops": "torch's `F.linear_cross_entropy`, chunked, on our kernels",
                 "ascend_ops-softcap-zloss": "ascend_ops, softcap 30 + z-loss 1e-4",
                 "eager-softcap-zloss": "eager plain formula, softcap 30 + z-loss 1e-4",
                 "ascend_ops-smoothing-weights": "ascend_ops, label smoothing 0.1 + class weights",
                 "eager-smoothing-weights": "eager plain formula, label smoothing 0.1 + class weights",
                 "gemms": "ascend_ops' three GEMMs alone (its engines)"}
#: Rows compared with another of the same run (lce_table's `against`): (time, peak
#: memory) as ratios to it.
LCE_AGAINST = {"torch-lce-chunked-ascend_ops": "torch-lce-chunked",
               "ascend_ops-softcap-zloss": "eager-softcap-zloss",
               "ascend_ops-smoothing-weights": "eager-smoothing-weights"}


def lce_table(rows: list[dict], every_row: list[dict] | None = None) -> str:
    """The newest row per provider of each (CPU class, engine, size, day); `against`
    compares a row with LCE_AGAINST's provider measured in the same run: its newest row of
    that run in `every_row` (the CSV, oldest first; `rows` when not given), none when the
    run did not measure it. Rows written before runs were recorded (empty `run`) pair with
    that provider's newest row of the same CPU class, engine, size and day if it has no run
    either: those may come from two runs of one day."""
    body = []
    groups = grouped(rows, LCE, "size")
    of_run = {}  # (run, CPU class, engine, size, provider): its newest row in that run
    for row in every_row if every_row is not None else rows:
        if row["op"] == LCE and row.get("run"):
            of_run[(row["run"], cpu_class(row), row["engine"], row["size"], row["provider"])] = row
    ordered = sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], size_key(kv[0][2]), kv[0][3]))
    for (cpu, engine, size, _), by in ordered:
        if "ascend_ops" not in by:
            continue
        base = float(by["ascend_ops"]["median_s"])
        for provider, label in LCE_PROVIDERS.items():
            if provider in by:
                row = by[provider]
                partner = LCE_AGAINST.get(provider, "")
                if row.get("run"):
                    other = of_run.get((row["run"], cpu, engine, size, partner))
                else:  # no run recorded: the partner of the same day, if it has none either
                    other = by.get(partner)
                    other = None if other is not None and other.get("run") else other
                against = ""
                if other is not None:
                    against = (f"{float(row['median_s']) / float(other['median_s']):.2f}× time, "
                               f"{float(row['peak_extra_mib']) / max(float(other['peak_extra_mib']), 1e-9):.2f}× "
                               f"memory of {LCE_PROVIDERS[LCE_AGAINST[provider]]}")
                body.append([cpu, engine, f"{size.replace('x', ', ')}, {row['rounds']} reps", label,
                             seconds(row["median_s"]), f"{float(row['median_s']) / base:.2f}",
                             mib(row["peak_extra_mib"]), against, measured(row)])
    return markdown(["CPU", "engine", "(BT, H, V)", "provider", "p50", "p50 / ascend_ops",
                     "peak extra", "against", "measured"], body)


GEMM_PEAK_CSV = ROOT / "scripts" / "results" / "gemm_peak.csv"


def gemm_peak_table(_rows: list[dict], path: pathlib.Path = GEMM_PEAK_CSV) -> str:
    """scripts/results/gemm_peak.csv (scripts/benchmark_gemm_peak.py and the linear cross
    entropy benchmark's peak fractions): the newest row per CPU, threads, size, product,
    engine and day."""
    latest: dict[tuple, dict] = {}
    if path.exists():
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                key = (row["cpu_model"], row["amx_bf16"], row["avx512_bf16"], row["threads"], row["size"],
                       row["product"], row["engine"], row["date"])
                latest[key] = row
    body = []
    for row in sorted(latest.values(), key=lambda r: (r["cpu_model"], r["threads"], size_key(r["size"]),
                                                      r["date"], r["product"], r["engine"])):
        body.append([cpu_class(row), f"{row['size'].replace('x', ', ')}, {row['rounds']} rounds", row["product"],
                     row["engine"], row["instruction"], f"{float(row['tflops']):.3f}",
                     f"{float(row['peak_tflops']):.3f}", f"{float(row['fraction']):.2f}", measured(row)])
    return markdown(["CPU", "(BT, H, V)", "GEMM", "engine", "instruction", "TFLOP/s", "peak TFLOP/s",
                     "peak fraction", "measured"], body)


TABLES = {"flce": flce_table, "bn": bn_table, "sync-bn": sync_bn_layer_table,
          "sync-bn-kernels": sync_bn_kernel_table, "linear-cross-entropy": lce_table,
          "gemm-peak": gemm_peak_table}


def render(doc: str, every_row: list[dict]) -> str:
    """`doc` with its tables made from `every_row` (the CSV, oldest first)."""
    rows = newest(every_row)
    tables = {**TABLES, "linear-cross-entropy": lambda rows: lce_table(rows, every_row)}
    for name, make in tables.items():
        pattern = re.compile(rf"(<!-- table:{name} -->\n).*?(<!-- /table:{name} -->)", re.S)
        if not pattern.search(doc):
            raise SystemExit(f"{DOC}: no <!-- table:{name} --> ... <!-- /table:{name} --> markers")
        doc = pattern.sub(lambda m: m.group(1) + make(rows) + "\n" + m.group(2), doc)
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=pathlib.Path, default=DEFAULT_CSV)
    parser.add_argument("--doc", type=pathlib.Path, default=DOC)
    parser.add_argument("--check", action="store_true", help="exit 1 if the doc is out of date")
    args = parser.parse_args(argv)
    doc = args.doc.read_text()
    new = render(doc, read_rows(args.csv))
    if args.check:
        if new != doc:
            print(f"{args.doc} is out of date: run python scripts/benchmark_tables.py", file=sys.stderr)
            return 1
        return 0
    args.doc.write_text(new)
    print(f"wrote the tables of {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
