#!/usr/bin/env python
"""Regenerate the tables of docs/benchmarks.md from the committed benchmark CSVs, so every
figure there has its data in scripts/results/.

Each table sits between `<!-- table:NAME -->` and `<!-- /table:NAME -->` in the markdown;
everything outside the markers is left alone. Each table shows the newest measurement per
CPU class (model, AMX-BF16 and AVX512-BF16 flags, threads) and per what it compares: the
GEMM engines (FLCE, GEMM peak), the batch-norm loops' build, or the provider (linear cross
entropy); older rows stay in the CSV and in git. A measurement is one benchmark run
(results_csv.py's `run`), or one day of one engine setting for rows written before runs
were recorded; ratios are taken within one measurement only, since these machines' speed
moves by up to 2x from one day to the next.

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
from results_csv import DEFAULT_CSV, read_rows  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
FLCE = "fused_linear_cross_entropy_loss_grad"
BN = "batch_norm_reduce_backward"
LCE = "linear_cross_entropy"


def cpu_class(row: dict) -> str:
    flags = [name for name in ("amx_bf16", "avx512_bf16") if row[name] == "1"]
    return f"{row['cpu_model']} ({', '.join(flags) or 'no bf16 ISA'}), {row['threads']} thr"


def size_key(size: str) -> tuple[int, ...]:
    return tuple(int(part) for part in size.split("x"))


def work(size: str) -> int:
    n = 1
    for part in size_key(size):
        n *= part
    return n


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
    """One table per CPU class (the first column of `header` and of every body row), each
    under its class's name, in the order the classes first appear. An "engines" column whose
    rows of a class all hold one value moves into that class's heading."""
    classes: dict[str, list[list[str]]] = {}
    for row in body:
        classes.setdefault(row[0], []).append(row[1:])
    parts = []
    for cpu, rows in classes.items():
        columns = header[1:]
        heading = f"*{cpu}*"
        if "engines" in columns:
            at = columns.index("engines")
            values = {row[at] for row in rows}
            if len(values) == 1:
                heading = f"*{cpu}, engines {values.pop()}*"
                columns = columns[:at] + columns[at + 1:]
                rows = [row[:at] + row[at + 1:] for row in rows]
        lines = [heading, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def gemm_engines(engine: str) -> str:
    """The GEMM engines of a row in one spelling: rows written before the per-kind choice
    name one engine for both kinds ("avx2" is "fp32_out=avx2 rounded=avx2"); the batch-norm
    loops' build, which some rows append, is not a GEMM engine."""
    engine = engine.split(" bn_loops=")[0]
    return engine if "=" in engine or engine in ("", "none") else f"fp32_out={engine} rounded={engine}"


def engines_label(engine: str) -> str:
    """gemm_engines' spelling, short: one name where both kinds run on it, else
    "fp32-out engine / rounded engine"."""
    engine = gemm_engines(engine)
    if "=" not in engine:
        return engine
    kinds = dict(part.split("=", 1) for part in engine.split())
    fp32_out, rounded = kinds.get("fp32_out", "?"), kinds.get("rounded", "?")
    return fp32_out if fp32_out == rounded else f"{fp32_out} / {rounded}"


def bn_loops(row: dict) -> str:
    """The batch-norm loops' build a row ran. Rows written before it was recorded ran the
    widest build there was: avx512 on the AVX512-BF16 class, portable on the others (the
    AVX2 build came later)."""
    if "bn_loops=" in row["engine"]:
        return row["engine"].split("bn_loops=")[1].split()[0]
    return "avx512" if row["avx512_bf16"] == "1" else "portable"


def measurement(row: dict, engine: str = "") -> tuple:
    """The measurement a row belongs to: its run, or for rows written before runs were
    recorded, its day (and engine setting): those rows of one day compare with each other."""
    return (row["run"],) if row.get("run") else (row["date"], engine)


def newest_measurements(rows: list[dict], op: str, key, setting=lambda row: "") -> list[tuple[tuple, dict]]:
    """[(key, {provider: row})]: for each key(row) of `op`'s rows, the newest measurement's
    rows (its newest row per provider). `rows` are oldest first, so the measurement holding
    the key's last row is the newest. The measurement is told apart by `setting` too (the
    engine) for rows that predate recorded runs."""
    groups: dict[tuple, dict[tuple, dict[str, dict]]] = defaultdict(dict)
    last: dict[tuple, tuple] = {}
    for row in rows:
        if row["op"] != op:
            continue
        k, m = key(row), measurement(row, setting(row))
        groups[k].setdefault(m, {})[row["provider"]] = row
        last[k] = m
    return [(k, groups[k][m]) for k, m in last.items()]


def flce_table(rows: list[dict]) -> str:
    """Per CPU class, engines, size and mode, the newest measurement: ours against the
    GEMM floor and plain torch."""
    body = []
    key = lambda r: (cpu_class(r), gemm_engines(r["engine"]), r["size"], r["mode"])  # noqa: E731
    ordered = sorted(newest_measurements(rows, FLCE, key, setting=lambda r: r["engine"]),
                     key=lambda kv: (kv[0][0], kv[0][1], size_key(kv[0][2]), kv[0][3] != "memory-saving"))
    for (cpu, engine, size, mode), by in ordered:
        # the bf16 floor, or the fp32 one where torch's bf16 matmul is a fallback (benchmark.py)
        floor_provider = next((p for p in ("gemm_floor", "gemm_floor_fp32") if p in by), None)
        if floor_provider is None or not {"ascend_ops", "torch_formula"} <= by.keys():
            continue
        ours, floor, torch_ = (float(by[p]["median_s"]) for p in ("ascend_ops", floor_provider, "torch_formula"))
        floor_label = seconds(by[floor_provider]["median_s"]) + (" (fp32)" if floor_provider.endswith("fp32") else "")
        # The memory target of memory-saving mode: the outputs plus half of the fp32 [BT, V]
        # logits it never holds.
        bt, _, v = (int(d) for d in size.split("x"))
        outputs = by["ascend_ops"]["outputs_mib"]
        limit = f"{float(outputs) + bt * v * 2 / 2**20:.0f} MiB" if outputs else "–"
        body.append([cpu, engines_label(engine), size.replace("x", ", "), mode, seconds(by["ascend_ops"]["median_s"]),
                     floor_label, f"{ours / floor:.2f}×",
                     seconds(by["torch_formula"]["median_s"]), f"{torch_ / ours:.2f}×",
                     mib(by["ascend_ops"]["peak_extra_mib"]), limit, measured(by["ascend_ops"])])
    return markdown(["CPU", "engines", "(BT, H, V)", "mode", "ours", "GEMM floor", "ours / floor",
                     "plain torch", "torch / ours", "peak extra", "target", "measured"], body)


def bn_table(rows: list[dict]) -> str:
    """Per CPU class, loops build, shape and dtype, the newest measurement."""
    body = []
    key = lambda r: (cpu_class(r), bn_loops(r), r["size"], r["dtype"])  # noqa: E731
    order = lambda kv: (kv[0][0], kv[0][1], -work(kv[0][2]), kv[0][3] != "float32")  # noqa: E731
    for (cpu, loops, size, dtype), by in sorted(newest_measurements(rows, BN, key), key=order):
        if not {"ascend_ops", "aten_native", "read_floor", "torch_formula"} <= by.keys():
            continue
        ours, aten, floor, torch_ = (float(by[p]["median_s"]) for p in
                                     ("ascend_ops", "aten_native", "read_floor", "torch_formula"))
        body.append([cpu, loops, size.replace("x", "×"), dtype, seconds(by["ascend_ops"]["median_s"]),
                     seconds(by["aten_native"]["median_s"]), f"{ours / aten:.2f}×",
                     seconds(by["read_floor"]["median_s"]), f"{ours / floor:.2f}×",
                     f"{torch_ / ours:.1f}×", measured(by["ascend_ops"])])
    return markdown(["CPU", "loops", "shape", "dtype", "ours", "aten native", "ours / aten", "read floor",
                     "ours / floor", "plain torch / ours", "measured"], body)


SYNC_BN = "sync_batch_norm"


def sync_bn_groups(rows: list[dict], mode: str) -> list[tuple[tuple, dict[str, dict]]]:
    """[((CPU class, size, dtype), {provider: row})]: the newest measurement of each, per
    CPU class (its thread count included) the most threads first, then by size. Not keyed
    by engine: a run's providers name different ones (ours, its portable build, aten)."""
    key = lambda r: (cpu_class(r), r["size"], r["dtype"], r["mode"])  # noqa: E731
    groups = [(k[:3], by) for k, by in newest_measurements(rows, SYNC_BN, key) if k[3] == mode]

    def order(item):
        (cpu, size, dtype), by = item
        threads = int(next(iter(by.values()))["threads"])
        return cpu.rsplit(",", 1)[0], -threads, work(size), dtype != "float32"
    return sorted(groups, key=order)


def sync_bn_layer_table(rows: list[dict]) -> str:
    """Forward + backward of one layer: ours (and its portable build) against BatchNorm2d."""
    body = []
    for (cpu, size, dtype), by in sync_bn_groups(rows, "fwd+bwd"):
        if not {"ascend_ops", "ascend_ops_portable", "batch_norm2d"} <= by.keys():
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
    for (cpu, size, dtype), by in sync_bn_groups(rows, "kernels"):
        cells = []
        for kernel, floor in SYNC_BN_FLOORS.items():
            ours, base = by.get(f"kernel:batch_norm_{kernel}"), by.get(floor)
            if ours is None or base is None:
                cells.append("–")
                continue
            o, b = float(ours["median_s"]), float(base["median_s"])
            cells.append(f"{o / b:.2f}× ({o * 1e3:.2f} ms)")
        body.append([cpu, size.replace("x", "×"), dtype, *cells])
    return markdown(["CPU", "shape", "dtype", "stats / read x (ours)", "elemt / copy x (ours)",
                     "backward_reduce / read dy+x (ours)", "backward_elemt / (dy + x) (ours)"], body)


LCE_PROVIDERS = {"ascend_ops": "ours, memory-saving",
                 "ascend_ops-high-performance": "ours, high-performance",
                 "ascend_ops-every-row": "ours, ignored rows run too",
                 "eager": "eager", "compile": "torch.compile",
                 "eager-fp32": "eager, fp32 copies", "compile-fp32": "torch.compile, fp32 copies",
                 "torch-lce": "torch LCE",
                 "torch-lce-chunked": "torch LCE chunked",
                 "torch-lce-chunked-ascend_ops": "torch LCE chunked, on ours",
                 "ascend_ops-softcap-zloss": "ours, softcap + z-loss",
                 "eager-softcap-zloss": "eager, softcap + z-loss",
                 "ascend_ops-smoothing-weights": "ours, smoothing + weights",
                 "eager-smoothing-weights": "eager, smoothing + weights",
                 "gemms": "our three GEMMs alone"}
#: Rows compared with another of the same run (lce_table's `against`): (time, peak
#: memory) as ratios to it.
LCE_AGAINST = {"torch-lce-chunked-ascend_ops": "torch-lce-chunked",
               "ascend_ops-softcap-zloss": "eager-softcap-zloss",
               "ascend_ops-smoothing-weights": "eager-smoothing-weights"}


def lce_table(rows: list[dict], every_row: list[dict] | None = None) -> str:
    """Per CPU class and size, each provider's newest row. Its `p50 / ascend_ops` is against
    ascend_ops' row of the same measurement (results_csv's `run`; for rows written before
    runs were recorded, the same engines and day), and `against` compares it with
    LCE_AGAINST's provider of the same measurement, if that measured it. `every_row` is the
    CSV, oldest first (`rows` when not given)."""
    every_row = rows if every_row is None else every_row
    newest_of: dict[tuple, dict[str, dict]] = defaultdict(dict)  # (CPU class, size): {provider: row}
    in_measurement: dict[tuple, dict] = {}  # (CPU class, size, measurement, provider): its newest row
    for row in every_row:
        if row["op"] != LCE:
            continue
        key = (cpu_class(row), row["size"])
        newest_of[key][row["provider"]] = row
        in_measurement[(*key, measurement(row, row["engine"]), row["provider"])] = row
    body = []
    for key in sorted(newest_of, key=lambda k: (k[0], size_key(k[1]))):
        cpu, size = key
        by = newest_of[key]
        for provider, label in LCE_PROVIDERS.items():
            if provider not in by:
                continue
            row = by[provider]
            m = measurement(row, row["engine"])
            base = in_measurement.get((*key, m, "ascend_ops"))
            ratio = f"{float(row['median_s']) / float(base['median_s']):.2f}" if base else "–"
            other = in_measurement.get((*key, m, LCE_AGAINST.get(provider, "")))
            against = ""
            if other is not None:
                against = (f"{float(row['median_s']) / float(other['median_s']):.2f}× time, "
                           f"{float(row['peak_extra_mib']) / max(float(other['peak_extra_mib']), 1e-9):.2f}× "
                           f"memory of {LCE_PROVIDERS[LCE_AGAINST[provider]]}")
            body.append([cpu, engines_label(row["engine"]), f"{size.replace('x', ', ')}, {row['rounds']} reps", label,
                         seconds(row["median_s"]), ratio, mib(row["peak_extra_mib"]), against, measured(row)])
    return markdown(["CPU", "engines", "(BT, H, V)", "provider", "p50", "p50 / ours (same run)",
                     "peak extra", "against", "measured"], body)


GEMM_PEAK_CSV = ROOT / "scripts" / "results" / "gemm_peak.csv"
GEMM_PRODUCTS = ("logits", "grad_input", "grad_weight")


def gemm_peak_table(_rows: list[dict], path: pathlib.Path = GEMM_PEAK_CSV) -> str:
    """scripts/results/gemm_peak.csv (scripts/benchmark_gemm_peak.py and the linear cross
    entropy benchmark's peak fractions): per CPU class, size and engine, each product's
    newest row, as its fraction of the register-only peak of its instruction measured beside
    it (and its TFLOP/s)."""
    latest: dict[tuple, dict] = {}
    if path.exists():
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                latest[(cpu_class(row), row["size"], row["engine"], row["product"])] = row
    lines: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for (cpu, size, engine, product), row in latest.items():
        lines[(cpu, size, engine)][product] = row
    body = []
    for (cpu, size, engine), by in sorted(lines.items(), key=lambda kv: (kv[0][0], size_key(kv[0][1]), kv[0][2])):
        cells = [f"{float(by[p]['fraction']):.2f} ({float(by[p]['tflops']):.3f})" if p in by else "–"
                 for p in GEMM_PRODUCTS]
        some = [by[p] for p in GEMM_PRODUCTS if p in by]
        peaks = sorted(float(r["peak_tflops"]) for r in some)
        newest = max(some, key=lambda r: r["date"])
        body.append([cpu, f"{size.replace('x', ', ')}, {newest['rounds']} rounds", engine, newest["instruction"],
                     f"{peaks[len(peaks) // 2]:.3f}", *cells, measured(newest)])
    return markdown(["CPU", "(BT, H, V)", "engine", "instruction", "peak TFLOP/s", "logits", "grad_input",
                     "grad_weight", "measured"], body)


TABLES = {"flce": flce_table, "bn": bn_table, "sync-bn": sync_bn_layer_table,
          "sync-bn-kernels": sync_bn_kernel_table, "linear-cross-entropy": lce_table,
          "gemm-peak": gemm_peak_table}


def render(doc: str, every_row: list[dict]) -> str:
    """`doc` with its tables made from `every_row` (the CSV, oldest first)."""
    for name, make in TABLES.items():
        pattern = re.compile(rf"(<!-- table:{name} -->\n).*?(<!-- /table:{name} -->)", re.S)
        if not pattern.search(doc):
            raise SystemExit(f"{DOC}: no <!-- table:{name} --> ... <!-- /table:{name} --> markers")
        doc = pattern.sub(lambda m: m.group(1) + make(every_row) + "\n" + m.group(2), doc)
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
