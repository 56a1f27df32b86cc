"""The benchmark's --quick path runs end to end (so it never rots). No timing is asserted:
performance lives in scripts/benchmark.py, not in tests."""

import csv
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_benchmark_quick_writes_every_provider(tmp_path):
    out = tmp_path / "bench.csv"
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--quick",
                             "--csv", str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = list(csv.DictReader(out.open()))
    seen = {(r["op"], r["mode"], r["dtype"], r["provider"]) for r in rows}
    for mode in ("memory-saving", "high-performance"):
        for provider in ("ascend_ops", "torch_formula"):
            assert ("fused_linear_cross_entropy_loss_grad", mode, "bfloat16", provider) in seen
        # one floor: in bf16 where torch's bf16 matmul is fast, else in fp32 (AVX2 CPUs)
        floors = [p for p in ("gemm_floor", "gemm_floor_fp32")
                  if ("fused_linear_cross_entropy_loss_grad", mode, "bfloat16", p) in seen]
        assert len(floors) == 1, floors
    for dtype in ("float32", "bfloat16"):
        for provider in ("ascend_ops", "torch_formula", "aten_native", "read_floor"):
            assert ("batch_norm_reduce_backward", "reduce", dtype, provider) in seen
    for dtype in ("float32", "bfloat16"):
        for provider in ("ascend_ops", "ascend_ops_portable", "batch_norm2d"):
            assert ("sync_batch_norm", "fwd+bwd", dtype, provider) in seen
        for op in ("stats", "elemt", "backward_reduce", "backward_elemt"):
            assert ("sync_batch_norm", "kernels", dtype, f"kernel:batch_norm_{op}") in seen
    sync_bn = [r for r in rows if r["op"] == "sync_batch_norm"]
    assert all(r["cpu_model"] and r["engine"] for r in sync_bn)
    assert {r["engine"] for r in sync_bn if r["provider"] == "batch_norm2d"} == {"aten"}
    flce = [r for r in rows if r["op"] == "fused_linear_cross_entropy_loss_grad"]
    assert all(float(r["peak_extra_mib"]) >= 0 for r in flce)
    assert all(float(r["p20_s"]) <= float(r["median_s"]) <= float(r["p80_s"]) for r in rows)
    assert all(r["cpu_model"] and r["amx_bf16"] in "01" and r["avx512_bf16"] in "01" and r["engine"]
               for r in rows)


def test_a_quick_run_writes_the_committed_results_only_when_asked(monkeypatch):
    # scripts/results/benchmarks.csv feeds docs/benchmarks.md: a smoke run's tiny sizes
    # must not land there unless --csv names it.
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import benchmark
    from results_csv import DEFAULT_CSV

    assert benchmark.output_csv(None, quick=True) is None
    assert benchmark.output_csv(None, quick=False) == DEFAULT_CSV
    given = pathlib.Path("/tmp/q.csv")
    assert benchmark.output_csv(given, quick=True) == given
    assert benchmark.output_csv(given, quick=False) == given
