"""docs/benchmarks.md's tables are what scripts/benchmark_tables.py makes of the committed
CSV (every figure has its data in the repo), and the generator computes the ratios right."""

import csv
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import benchmark_tables  # noqa: E402
from results_csv import FIELDS, newest_rows  # noqa: E402


def test_docs_tables_match_the_committed_csv():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark_tables.py"), "--check"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_flce_row_ratios(tmp_path):
    machine = {"threads": "2", "cpu_model": "Xeon X", "amx_bf16": "1", "avx512_bf16": "1",
               "engine": "onednn", "rounds": "3", "torch": "t", "date": "d", "load_1m": "2.5"}
    rows = []
    for provider, median in (("ascend_ops", "0.5"), ("gemm_floor", "0.4"), ("torch_formula", "2.0")):
        rows.append({**{f: "" for f in FIELDS}, **machine, "op": benchmark_tables.FLCE,
                     "provider": provider, "mode": "memory-saving", "dtype": "bfloat16",
                     "size": "8x4x16", "median_s": median, "p20_s": median, "p80_s": median,
                     "budget_mib": "0.0" if provider == "ascend_ops" else "", "outputs_mib": "1.0",
                     "peak_extra_mib": "70.2"})
    table = benchmark_tables.flce_table(rows)
    assert table.startswith("*Xeon X (amx_bf16, avx512_bf16), 2 thr, engines onednn*")
    assert "| 8, 4, 16 | memory-saving | 500.0 ms | " \
           "400.0 ms | 1.25× | 2000 ms | 4.00× | 70 MiB | 1 MiB | d, load 2.5 |" in table
    path = tmp_path / "r.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    assert len(newest_rows(path)) == 3


def lce_row(provider: str, median: float, peak: float, run: str, date: str = "2026-12-05") -> dict:
    machine = {"threads": "2", "cpu_model": "EPYC", "amx_bf16": "0", "avx512_bf16": "1",
               "engine": "avx512bf16", "rounds": "3", "torch": "t", "date": date, "load_1m": "1.0"}
    return {**{f: "" for f in FIELDS}, **machine, "op": benchmark_tables.LCE, "provider": provider,
            "mode": "forward+backward", "dtype": "bfloat16", "size": "64x32x300",
            "median_s": str(median), "p20_s": str(median), "p80_s": str(median),
            "peak_extra_mib": str(peak), "run": run}


def against_column(table: str) -> dict[str, str]:
    """{provider label: its `against` cell} of lce_table's markdown."""
    cells = [line.split(" | ") for line in table.splitlines()[4:]]
    return {row[1]: row[5] for row in cells}  # every row of one class on one engine: no engines column


def test_lce_against_pairs_rows_of_one_run():
    # Run A measured every provider; later runs of the same day only some: B both option-set
    # providers, C the eager option set alone, D ours with smoothing alone. Each provider's
    # newest row is shown, compared with its partner of the same run: the softcap row (B's)
    # with B's eager row, not C's newer one; D's smoothing row with none (A's is another run).
    label = benchmark_tables.LCE_PROVIDERS
    every_row = [lce_row("ascend_ops", 1.0, 100, "A"),
                 lce_row("torch-lce-chunked-ascend_ops", 1.5, 50, "A"),
                 lce_row("torch-lce-chunked", 3.0, 200, "A"),
                 lce_row("ascend_ops-softcap-zloss", 2.0, 100, "A"),
                 lce_row("eager-softcap-zloss", 4.0, 400, "A"),
                 lce_row("ascend_ops-smoothing-weights", 2.0, 100, "A"),
                 lce_row("eager-smoothing-weights", 4.0, 100, "A"),
                 lce_row("ascend_ops-softcap-zloss", 2.0, 100, "B"),
                 lce_row("eager-softcap-zloss", 8.0, 400, "B"),
                 lce_row("eager-softcap-zloss", 16.0, 400, "C"),
                 lce_row("ascend_ops-smoothing-weights", 3.0, 100, "D")]
    against = against_column(benchmark_tables.lce_table(every_row))
    assert against[label["torch-lce-chunked-ascend_ops"]] == \
        f"0.50× time, 0.25× memory of {label['torch-lce-chunked']}"
    assert against[label["ascend_ops-softcap-zloss"]] == \
        f"0.25× time, 0.25× memory of {label['eager-softcap-zloss']}"  # B's pair; C's would be 0.12×
    assert against[label["ascend_ops-smoothing-weights"]] == ""  # D measured no partner
    assert against[label["eager-softcap-zloss"]] == ""  # a partner, not compared itself
    # The whole document is made the same way from the CSV's rows, oldest first.
    doc = "<!-- table:linear-cross-entropy -->\n<!-- /table:linear-cross-entropy -->"
    for name in benchmark_tables.TABLES:
        if name != "linear-cross-entropy":
            doc += f"\n<!-- table:{name} -->\n<!-- /table:{name} -->"
    assert "0.25× time, 0.25× memory of eager, softcap" in benchmark_tables.render(doc, every_row)


def test_lce_against_of_rows_without_a_run_pairs_within_the_day():
    # Rows written before runs were recorded pair with the partner's newest row of the same
    # day and engines that has no run either, never with a row of a recorded run.
    label = benchmark_tables.LCE_PROVIDERS
    every_row = [lce_row("ascend_ops", 1.0, 100, ""),
                 lce_row("ascend_ops-softcap-zloss", 2.0, 100, ""),
                 lce_row("eager-softcap-zloss", 4.0, 400, ""),
                 lce_row("ascend_ops-smoothing-weights", 2.0, 100, ""),
                 lce_row("eager-smoothing-weights", 4.0, 100, ""),
                 lce_row("eager-smoothing-weights", 8.0, 100, "E")]
    against = against_column(benchmark_tables.lce_table(every_row))
    assert against[label["ascend_ops-softcap-zloss"]] == \
        f"0.50× time, 0.25× memory of {label['eager-softcap-zloss']}"
    assert against[label["ascend_ops-smoothing-weights"]] == \
        f"0.50× time, 1.00× memory of {label['eager-smoothing-weights']}"  # E's row would give 0.25×


def test_tables_show_the_newest_measurement_per_cpu_class():
    # Two days of one CPU class and engines: the table shows the newer day only, whatever
    # the older day measured better; an older engine spelling is the same engines.
    def flce(provider, median, date, engine):
        return {**{f: "" for f in FIELDS}, "threads": "2", "cpu_model": "EPYC", "amx_bf16": "0",
                "avx512_bf16": "0", "engine": engine, "rounds": "3", "date": date, "op": benchmark_tables.FLCE,
                "provider": provider, "mode": "memory-saving", "dtype": "bfloat16", "size": "8x4x16",
                "median_s": median, "outputs_mib": "1.0", "peak_extra_mib": "2.0"}
    old = [flce(p, m, "2026-12-01", "avx2") for p, m in (("ascend_ops", "0.1"), ("gemm_floor", "0.4"),
                                                         ("torch_formula", "1.0"))]
    new = [flce(p, m, "2026-12-02", "fp32_out=avx2 rounded=avx2") for p, m in
           (("ascend_ops", "0.5"), ("gemm_floor", "0.4"), ("torch_formula", "1.0"))]
    lines = benchmark_tables.flce_table(old + new).splitlines()[4:]
    assert len(lines) == 1 and "| 500.0 ms |" in lines[0] and "2026-12-02" in lines[0]


def test_an_append_upgrades_a_file_of_the_schema_before_run(tmp_path):
    # The committed CSVs predate `run`: the next append adds the column (empty for the old
    # rows), keeps every old field and csv's CRLF line ends, and stamps the new rows.
    import dataclasses
    from results_csv import FIELDS_BEFORE_RUN, RUN, ResultRow, append_rows, read_rows

    path = tmp_path / "old.csv"
    old = [{f: "" for f in FIELDS_BEFORE_RUN} | {"op": "x", "provider": p, "median_s": "0.5",
                                                  "engine_tflops": "fp32_out: a=0.1 b=0.2"}
           for p in ("p1", "p2")]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS_BEFORE_RUN)
        writer.writeheader()
        writer.writerows(old)
    old_lines = path.read_bytes().split(b"\r\n")
    new = ResultRow("x", "p3", "m", "bfloat16", "1x2x3", 2, "EPYC", 0, 1, "e", 0.1, 0.1, 0.1, 3)
    append_rows(path, [new])
    lines = path.read_bytes().split(b"\r\n")
    assert lines[0] == b",".join(f.encode() for f in FIELDS)
    assert lines[1:3] == [line + b"," for line in old_lines[1:3]]
    assert b"\n" not in b"".join(lines)  # every line ends in CRLF
    rows = read_rows(path)
    assert [r["run"] for r in rows] == ["", "", RUN] and RUN
    assert rows[2]["provider"] == "p3" and dataclasses.asdict(new)["run"] == RUN
