"""The one CSV schema of the benchmark scripts (scripts/benchmark.py,
scripts/benchmark_linear_cross_entropy.py) and of scripts/benchmark_tables.py.

A row is one provider's timing of one op at one size on one machine:

    op, provider, mode, dtype, size      what ran ("4096x4096x16000", "64x64x112x112")
    threads, cpu_model, amx_bf16, avx512_bf16, engine
                                         where: the CPU class and the ascend_ops CPU GEMM
                                         engines in force in the measuring process, one
                                         per kind of product ("fp32_out=mkl rounded=onednn";
                                         a single name in rows before 2026-12-03)
    median_s, p20_s, p80_s, rounds       the timing
    peak_extra_mib, budget_mib, outputs_mib   memory, where measured (else empty);
                                         budget_mib: what the memory target allows
                                         beyond the outputs (FLCE: BT * V * 2 bytes;
                                         64, the chunk budget, in rows before 2026-12-02)
    torch, date
    load_1m                              the 1-minute load average when the run started:
                                         above the thread count, other processes competed
    engine_tflops                        every available GEMM engine's TFLOP/s on each
                                         kind's first-use product ("fp32_out: onednn=0.317
                                         avx2=0.2 portable=0.167; rounded: ..."; one list in
                                         rows before 2026-12-03): how close the choices were
                                         on this CPU class (empty in rows before 2026-12-01)
    run                                  the run that wrote the row: one id per benchmark
                                         process (its UTC start time and pid), shared by all
                                         its rows, so that rows compared with each other come
                                         from one run (empty in rows before 2026-12-05)

Rows are appended; a reader keeps the newest row per key (every field up to engine, and
the date: runs of different days stay side by side). A file of the schema before `run`
is upgraded in place by the next append (its rows get an empty run).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import os
import pathlib

import torch

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
DEFAULT_CSV = RESULTS / "benchmarks.csv"
# This process's run: every row it makes carries it (ResultRow.run).
RUN = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M:%SZ}-{os.getpid()}"


@dataclasses.dataclass
class ResultRow:
    op: str
    provider: str
    mode: str
    dtype: str
    size: str
    threads: int
    cpu_model: str
    amx_bf16: int
    avx512_bf16: int
    engine: str
    median_s: float
    p20_s: float
    p80_s: float
    rounds: int
    peak_extra_mib: float | None = None
    budget_mib: float | None = None
    outputs_mib: float | None = None
    torch: str = torch.__version__
    date: str = dataclasses.field(default_factory=lambda: datetime.date.today().isoformat())
    load_1m: float | None = None
    engine_tflops: str = ""
    run: str = RUN


FIELDS = [f.name for f in dataclasses.fields(ResultRow)]
KEY = FIELDS[:FIELDS.index("engine") + 1] + ["date"]
# The schema before `run` (2026-12-05): append_rows upgrades such a file.
FIELDS_BEFORE_RUN = FIELDS[:FIELDS.index("run")]


def quantile(sorted_values: list[float], q: float) -> float:
    """The q-quantile of sorted samples, interpolating linearly between neighbours."""
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def timing_fields(samples: list[float], rounds: int) -> dict:
    """median_s, p20_s, p80_s and rounds of a row, from one provider's timed samples."""
    ordered = sorted(samples)
    return {"median_s": quantile(ordered, 0.5), "p20_s": quantile(ordered, 0.2),
            "p80_s": quantile(ordered, 0.8), "rounds": rounds}


def machine_fields() -> dict:
    """threads, cpu_model, amx_bf16, avx512_bf16, engine, load_1m and engine_tflops of this
    process."""
    from ascend_ops.cpu_info import cpu_info, gemm_engine_report

    info = cpu_info()
    try:
        report = gemm_engine_report()
        engine = report.engine
        tflops = "; ".join(f"{kind}: " + " ".join(f"{name}={t:.3f}" for name, t in speeds.items())
                           for kind, speeds in report.tflops.items())
    except RuntimeError:  # the native library is not loaded
        engine, tflops = "none", ""
    return {"threads": torch.get_num_threads(), "cpu_model": info.model,
            "amx_bf16": int(info.amx_bf16), "avx512_bf16": int(info.avx512_bf16), "engine": engine,
            "load_1m": round(os.getloadavg()[0], 2), "engine_tflops": tflops}


def append_rows(path: pathlib.Path, rows: list[ResultRow]) -> None:
    """Append to `path`, writing the header if the file is new; a file of the schema before
    `run` is first rewritten with it (its rows' run empty, every other field as it was); a
    file with another header is an error (write to a new file instead of mixing schemas)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.stat().st_size > 0:
        with path.open(newline="") as f:
            header = next(csv.reader(f), [])
        if header == FIELDS_BEFORE_RUN:
            upgrade_to_run_field(path)
        elif header != FIELDS:
            raise SystemExit(f"{path}: header {header} is not this schema {FIELDS}; "
                             f"use another --csv")
        new = False
    else:
        new = True
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        writer.writerows(dataclasses.asdict(r) for r in rows)


def upgrade_to_run_field(path: pathlib.Path) -> None:
    """Rewrite a file of the schema before `run` with the run column, empty, at the end."""
    old = read_rows(path)
    with path.open("w", newline="") as f:  # csv's own line ends (CRLF), as the rows were written
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows({**row, "run": ""} for row in old)


def read_rows(path: pathlib.Path) -> list[dict]:
    """Every row of `path`, oldest first; `run` is "" where the file has no such column."""
    with path.open(newline="") as f:
        return [{"run": "", **row} for row in csv.DictReader(f)]


def newest(rows: list[dict]) -> list[dict]:
    """The newest of `rows` (oldest first) per key, in order of first appearance."""
    latest: dict[tuple, dict] = {}
    for row in rows:
        latest[tuple(row[k] for k in KEY)] = row  # later rows are newer
    return list(latest.values())


def newest_rows(path: pathlib.Path) -> list[dict]:
    """The rows of `path`, the newest per key, in order of first appearance."""
    return newest(read_rows(path))
