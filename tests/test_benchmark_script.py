"""scripts/benchmark_linear_cross_entropy.py --quick runs end to end (no timing is asserted)."""

import csv
import os
import pathlib
import subprocess
import sys

import ascend_ops

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_quick_benchmark_runs_every_provider(tmp_path):
    out = tmp_path / "bench.csv"
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(ascend_ops.__file__).parents[1])}
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark_linear_cross_entropy.py"),
                             "--quick", "--csv", str(out)], capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    printed = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    # the baselines in bf16, or in fp32 where torch's bf16 matmul is slow (AVX2 CPUs)
    assert {"ascend_ops", "ascend_ops-high-performance"} <= printed, result.stdout
    assert {"eager", "compile"} <= printed or {"eager-fp32", "compile-fp32"} <= printed, result.stdout
    if "eager" in printed:  # torch's own F.linear_cross_entropy and the option sets
        assert {"torch-lce", "torch-lce-chunked", "torch-lce-chunked-ascend_ops",
                "ascend_ops-softcap-zloss", "eager-softcap-zloss",
                "ascend_ops-smoothing-weights", "eager-smoothing-weights"} <= printed, result.stdout
    assert "ascend_ops / fastest torch provider" in result.stdout
    # the step's GEMMs alone
    assert "gemms" in printed, result.stdout
    assert "ascend_ops / its three GEMMs (gemms)" in result.stdout
    lines = out.read_text().splitlines()
    assert lines[0].startswith("op,provider,mode,dtype,size,threads,cpu_model,amx_bf16,avx512_bf16,engine")
    assert len(lines) == 1 + (12 if "eager" in printed else 5)
    # each GEMM's peak fraction, beside the CSV
    peak = list(csv.DictReader((tmp_path / "gemm_peak.csv").read_text().splitlines()))
    assert [r["product"] for r in peak] == ["logits", "grad_input", "grad_weight"]
    assert all(float(r["peak_tflops"]) > 0 and float(r["fraction"]) >= 0 for r in peak)
    # what judges a run on another CPU class: every engine's measured speed in each row
    rows = list(csv.DictReader(lines))
    # one run: every row carries its id (benchmark_tables compares rows of one run)
    assert len({row["run"] for row in rows}) == 1 and rows[0]["run"], rows[0]
    for engine in ascend_ops._C.cpu_gemm_engines():
        assert all(f"{engine}=" in row["engine_tflops"] for row in rows), rows[0]


def test_fresh_process_comparison_with_torch_runs_both_sides():
    """scripts/benchmark_torch_lce_fresh.py: torch's chunked F.linear_cross_entropy and ours,
    each in a fresh process, the same loss on both sides."""
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(ascend_ops.__file__).parents[1])}
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark_torch_lce_fresh.py"),
                             "--size", "64", "32", "300", "--pairs", "1"], capture_output=True,
                            text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[1:]
            if line.strip() and " / " not in line}
    assert {"torch", "ours"} <= rows.keys(), result.stdout
    # one step each: the last column is the loss, within bfloat16 rounding of torch's
    assert abs(float(rows["ours"][-1]) - float(rows["torch"][-1])) <= 1e-2 * abs(float(rows["torch"][-1]))
    assert "ours / torch:" in result.stdout
