"""docs/benchmarks.md's tables are what scripts/benchmark_tables.py makes of the committed
CSV (every figure has its data in the repo), and the generator computes the ratios right."""

import csv
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import benchmark_tables  # noqa: E402
from results_csv import FIELDS  # noqa: E402


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
    assert "| Xeon X (amx_bf16, avx512_bf16), 2 thr | onednn | 8, 4, 16 | memory-saving | 500.0 ms | " \
           "400.0 ms | 1.25× | 2000 ms | 4.00× | 70 MiB | 1 MiB | d, load 2.5 |" in table
    path = tmp_path / "r.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    assert len(benchmark_tables.newest_rows(path)) == 3
