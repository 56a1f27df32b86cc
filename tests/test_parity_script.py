"""scripts/parity.py's edge grid (V < 128, H > 65535, BT = 0, V past the high-performance
limit) on the implementations
available here, and how it reports a refusal."""

import csv
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest
import torch

from ascend_ops import _C
from ascend_ops.npu import limits as npu_limits

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENGINES = list(_C.cpu_gemm_engines())


@pytest.fixture(scope="module")
def parity_script():
    spec = importlib.util.spec_from_file_location("parity_script", ROOT / "scripts" / "parity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_edge_grid_covers_the_shapes_the_builtins_treat_specially(parity_script):
    flce = parity_script.edge_flce_cases()
    assert any(c.v < 128 for c in flce) and any(c.h > 65535 for c in flce)
    assert any(c.bt == 0 for c in flce)
    limit = npu_limits.builtin_limits()["flce_grad_high_perf_max_vocab"]
    assert any(c.v == limit + 1 for c in flce)
    assert {c.mode for c in flce} == {"memory-saving", "high-performance"}


def softmax_left(engine: str, case) -> str:
    """What SPEC says the CPU kernel leaves in a high-performance row's softmax, `engine`
    forced for both kinds of product: with `onednn` for the rounded products a bfloat16
    kernel writes G over a contiguous softmax (when there is anything to write); every
    other engine (mkl included) and float16 keep it."""
    writes = engine == "onednn" and case.dtype == torch.bfloat16 and case.bt * case.v > 0
    return "overwritten" if writes else "kept"


@pytest.mark.parametrize("engine", ENGINES)
def test_edge_rows_cpu_pass_and_report_softmax(parity_script, engine, tmp_path):
    """Every edge row passes on every GEMM engine, each in its own process (the engine is
    chosen once per process), and each row's softmax is left as SPEC says for that engine."""
    path = tmp_path / "edges.csv"
    env = {**os.environ, "ASCEND_OPS_CPU_GEMM": engine}
    subprocess.run([sys.executable, str(ROOT / "scripts" / "parity.py"), "--grid", "edges",
                    "--impl", "cpu", "--edges-csv", str(path)], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    with path.open(newline="") as f:
        rows = {r["case"]: r for r in csv.DictReader(f)}
    cases = parity_script.edge_flce_cases()
    assert len(rows) == len(cases) + len(parity_script.edge_bn_cases())
    assert all(r["result"] == "pass" for r in rows.values()), rows
    for case in cases:
        expected = softmax_left(engine, case) if case.mode == "high-performance" else ""
        assert rows[case.name]["softmax"] == expected, (engine, case.name)


def refuse(op, impl, inputs):
    """How each implementation refuses: our adapter up front, naming the limit (its
    NotImplementedError, builtin_limits.cpp); anything else with CANN's phase-1 status."""
    if impl == "npu":
        raise NotImplementedError("fused_linear_cross_entropy_loss_grad: CANN's built-in "
                                  "aclnnFusedLinearCrossEntropyLossGrad needs ... (161002 otherwise)")
    raise RuntimeError("aclnnX GetWorkspaceSize rejected its arguments: 161002")


def test_only_documented_refusals_are_accepted(parity_script, monkeypatch):
    """CANN's built-in may refuse H > 65535, and V < 128 or V past the derived limit (our
    adapter: in high-performance mode only, and up front); any other error, of any
    implementation, fails the row."""
    monkeypatch.setattr(parity_script, "run", refuse)
    limit = npu_limits.builtin_limits()["flce_grad_high_perf_max_vocab"]
    rows = parity_script.edge_rows(["cpu", "sim", "reference", "torch_npu", "npu", "npu_custom"])
    by = {(r.impl, r.case): r for r in rows}
    for (impl, case), row in by.items():
        flce = next((c for c in parity_script.edge_flce_cases() if c.name == case), None)
        high_performance = flce is not None and flce.mode == "high-performance"
        documented = flce is not None and (
            (impl in ("torch_npu", "npu") and flce.h > 65535)
            or (impl == "torch_npu" and flce.v < 128)
            or (impl in ("torch_npu", "npu") and high_performance
                and not 128 <= flce.v <= limit)
            or (impl == "npu_custom" and flce.bt > 0 and flce.h > 65535))  # our package's limit, any error
        # impl="sim" refuses with its own message only (a ValueError naming the argument).
        assert row.result == ("refused" if documented else "FAIL"), (impl, case, row)
        assert "161002" in row.detail
    refused = [r for r in rows if r.result == "refused"]
    assert refused and all(r.detail.startswith(("CANN's", "our op package's")) for r in refused)


def test_npu_reaching_cann_with_a_refused_shape_fails_the_row(parity_script, monkeypatch):
    """impl='npu' must refuse CANN's limits before the call: the same shape refused by
    CANN's phase 1 instead (a RuntimeError with 161002) is a failure, not the documented
    refusal."""
    monkeypatch.setattr(parity_script, "run",
                        lambda op, impl, inputs: refuse(op, "torch_npu", inputs))
    rows = parity_script.edge_rows(["npu"])
    over = [r for r in rows if r.op == "fused_linear_cross_entropy_loss_grad" and "h65537" in r.case]
    assert over and all(r.result == "FAIL" for r in over), over


def test_a_simulator_violation_fails_the_row(parity_script, monkeypatch):
    from ascend_ops.sim.simulator import SimulatorError

    def violate(op, impl, inputs):
        raise SimulatorError("UB overflow: 196 KiB requested, 192 KiB available")

    monkeypatch.setattr(parity_script, "run", violate)
    rows = parity_script.edge_rows(["sim"])
    assert rows and all(r.result == "FAIL" and "UB overflow" in r.detail for r in rows)
