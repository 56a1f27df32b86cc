"""scripts/parity.py's edge grid (V < 128, H > 65535, BT = 0) on the implementations
available here, and how it reports a refusal."""

import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


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
    assert {c.mode for c in flce} == {"memory-saving", "high-performance"}


def test_edge_rows_cpu_pass_and_report_softmax(parity_script, tmp_path):
    assert parity_script.main(["--grid", "edges", "--impl", "cpu",
                               "--edges-csv", str(tmp_path / "edges.csv")]) == 0
    lines = (tmp_path / "edges.csv").read_text().splitlines()
    cases = len(parity_script.edge_flce_cases()) + len(parity_script.edge_bn_cases())
    assert len(lines) == 1 + cases
    hp = [line for line in lines if "high-performance" in line]
    assert hp and all(",kept,pass," in line for line in hp)  # the CPU kernel leaves softmax intact


def test_a_refusal_is_reported_not_raised(parity_script, monkeypatch):
    def refuse(op, impl, inputs):
        raise RuntimeError("aclnnX GetWorkspaceSize rejected its arguments: 161002")

    monkeypatch.setattr(parity_script, "run", refuse)
    rows = parity_script.edge_rows(["cpu"])
    assert rows and all(r.result == "refused" and "161002" in r.detail for r in rows)
