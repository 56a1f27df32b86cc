#!/usr/bin/env python
"""Plot the benchmark CSV of scripts/benchmark.py: time against size, one line per
provider, a panel per op and mode/dtype, plus the peak extra memory of FLCE.

One point per op, provider, mode, dtype and size: the newest row of the CSV for one CPU
model and thread count (whatever its date or engine), so a panel shows one run, not a
history.
Needs matplotlib (`pip install matplotlib`); the benchmark itself does not.

    python scripts/plot_benchmarks.py scripts/results/benchmarks.csv -o scripts/results/benchmarks.png
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
RESULTS = ROOT / "scripts" / "results"


def size_key(size: str) -> int:
    """Work of a size string "AxBxC": the product of its numbers."""
    total = 1
    for part in size.split("x"):
        total *= int(part)
    return total


def latest_points(path: pathlib.Path, threads: int) -> list[dict]:
    """The newest row per (op, provider, mode, dtype, size) at `threads` threads, for the
    CPU class (model and bf16 ISA flags: one model name covers CPUs with and without
    AVX512) of the newest row: rows are appended, so later rows are newer."""
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(r["threads"]) == threads]
    if not rows:
        return []

    def cpu_class(row: dict) -> tuple:
        return row["cpu_model"], row["amx_bf16"], row["avx512_bf16"]

    cpu = cpu_class(rows[-1])
    latest: dict[tuple, dict] = {}
    for row in rows:
        if cpu_class(row) == cpu:
            latest[(row["op"], row["provider"], row["mode"], row["dtype"], row["size"])] = row
    return list(latest.values())


def panels(rows: list[dict]) -> list[tuple[str, str, list[dict]]]:
    """(title, y label, rows) per panel: time per op and mode/dtype, then FLCE memory."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        variant = row["mode"] if row["op"].startswith("fused") else row["dtype"]
        if row["op"] == "sync_batch_norm":  # a layer panel and a kernels panel per dtype
            variant = f"{row['mode']}, {row['dtype']}"
        groups.setdefault((row["op"], variant), []).append(row)
    result = [(f"{op}\n{variant}", "median time (s)", g) for (op, variant), g in sorted(groups.items())]
    memory = [r for r in rows if r["peak_extra_mib"]]
    if memory:
        result.append(("fused_linear_cross_entropy_loss_grad\npeak extra memory", "MiB", memory))
    return result


def plot(rows: list[dict], out: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = panels(rows)
    columns = min(3, len(chosen))
    lines_of_panels = -(-len(chosen) // columns)
    fig, axes = plt.subplots(lines_of_panels, columns, figsize=(5.2 * columns, 4.2 * lines_of_panels),
                             squeeze=False)
    for ax in axes.flat[len(chosen):]:
        ax.set_visible(False)
    for ax, (title, ylabel, group) in zip(axes.flat, chosen):
        memory = ylabel == "MiB"
        lines: dict[str, list[dict]] = {}
        for row in group:
            label = f"{row['provider']} ({row['mode']})" if memory else row["provider"]
            lines.setdefault(label, []).append(row)
        sizes = sorted({r["size"] for r in group}, key=size_key)
        for label, points in sorted(lines.items()):
            points.sort(key=lambda r: size_key(r["size"]))
            xs = [sizes.index(r["size"]) for r in points]
            ys = [float(r["peak_extra_mib"] if memory else r["median_s"]) for r in points]
            ax.plot(xs, ys, marker="o", label=label)
            if not memory:
                low = [float(r["p20_s"]) for r in points]
                high = [float(r["p80_s"]) for r in points]
                ax.fill_between(xs, low, high, alpha=0.2)
        ax.set_xticks(range(len(sizes)), sizes, rotation=20, fontsize=8)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    machine = f"{rows[0]['cpu_model']}, {rows[0]['threads']} threads" if rows else ""
    fig.suptitle(f"ascend_ops CPU kernels — {machine}, torch {rows[0]['torch'] if rows else ''}",
                 fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=pathlib.Path, nargs="?", default=RESULTS / "benchmarks.csv")
    parser.add_argument("-o", "--out", type=pathlib.Path, default=RESULTS / "benchmarks.png")
    parser.add_argument("--threads", type=int, default=2, help="the thread count to plot (default 2)")
    args = parser.parse_args(argv)
    rows = latest_points(args.csv, args.threads)
    if not rows:
        print(f"{args.csv}: no rows", file=sys.stderr)
        return 1
    plot(rows, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
