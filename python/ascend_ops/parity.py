"""Parity table: every available implementation against the float64 reference.

For each op, implementation and dtype, runs the shared sample cases (ascend_ops.testing)
and reports the largest errors against the float64 reference of the same math (per
element, absolute and relative; per output, relative to the output's norm) and whether
every output met both of SPEC §4's bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import ops, testing
from ._impls import OP_IMPLS, available_impls


@dataclass
class ParityRow:
    op: str
    impl: str
    dtype: str
    cases: int
    max_abs_error: float
    max_rel_error: float
    passed: bool
    worst: str  # the failing case and its worst element, or ""
    max_norm_error: float = 0.0  # the largest ‖ours − reference‖ / ‖reference‖ of an output


def _clone(inputs: dict) -> dict:
    # High-performance mode may use softmax as scratch: give every run its own copy.
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def _op_rows(op: str, impl: str, groups: dict, run, oracle, naive) -> list[ParityRow]:
    rows = []
    for dtype, cases in groups.items():
        row = ParityRow(op, impl, str(dtype).removeprefix("torch."), 0, 0.0, 0.0, True, "")
        for case, inputs in cases:
            outputs = run(_clone(inputs), impl)
            for index, (ours, ref, low) in enumerate(zip(outputs, oracle(inputs), naive(inputs))):
                name = f"out{index}"
                if ours is None:
                    continue
                result = testing.compare(ours, ref, low)
                row.max_abs_error = max(row.max_abs_error, result.max_abs_error)
                row.max_rel_error = max(row.max_rel_error, result.max_rel_error)
                row.max_norm_error = max(row.max_norm_error, result.norm_rel_error)
                if not result.passed and row.passed:
                    row.passed = False
                    row.worst = f"{case.name} output {name}: {result.message}"
            row.cases += 1
        rows.append(row)
    return rows


def parity_rows(impls: list[str] | None = None) -> list[ParityRow]:
    """Run the parity grid for `impls` (default: every available implementation)."""
    status = available_impls()
    impls = impls or [name for name, s in status.items() if s.available]
    flce_groups: dict = {}
    for case in testing.flce_cases():
        flce_groups.setdefault(case.dtype, []).append((case, testing.flce_inputs(case)))
    bn_groups: dict = {}
    for case in testing.bn_cases():
        bn_groups.setdefault(case.dtype, []).append((case, testing.bn_inputs(case)))

    online_groups: dict = {}
    for case in testing.online_cases():
        online_groups.setdefault(case.dtype, []).append((case, testing.online_inputs(case)))
    loss_groups: dict = {}
    for case in testing.loss_cases():
        loss_groups.setdefault(case.logits_dtype or torch.float32, []).append(
            (case, testing.loss_inputs(case)))

    rows = []
    grids = [
        ("fused_linear_cross_entropy_loss_grad", flce_groups, ops.fused_linear_cross_entropy_loss_grad,
         testing.flce_oracle, testing.flce_naive),
        ("batch_norm_reduce_backward", bn_groups, ops.batch_norm_reduce_backward,
         testing.bn_oracle, testing.bn_naive),
        ("fused_linear_online_max_sum", online_groups, ops.fused_linear_online_max_sum,
         testing.online_oracle, testing.online_naive),
        ("fused_cross_entropy_loss_with_max_sum", loss_groups, ops.fused_cross_entropy_loss_with_max_sum,
         testing.loss_oracle, testing.loss_naive),
    ]
    for impl in impls:
        for op, groups, function, oracle, naive in grids:
            if impl in OP_IMPLS[op]:  # e.g. sim implements only the backward operators
                rows += _op_rows(op, impl, groups,
                                 lambda inputs, impl, function=function: function(**inputs, impl=impl),
                                 oracle, naive)
    return rows


def format_table(rows: list[ParityRow]) -> str:
    header = ("op", "impl", "dtype", "cases", "max abs err", "max rel err", "max norm err", "result")
    body = [(r.op, r.impl, r.dtype, str(r.cases), f"{r.max_abs_error:.3g}",
             f"{r.max_rel_error:.3g}", f"{r.max_norm_error:.3g}", "pass" if r.passed else "FAIL")
            for r in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)) for line in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    failures = [f"FAIL {r.op} [{r.impl}, {r.dtype}]: {r.worst}" for r in rows if not r.passed]
    return "\n".join(lines + failures)
