"""Parity table: every available implementation against the float64 reference.

For each op, implementation and dtype, runs the shared sample cases (ascend_ops.testing)
and reports the largest errors against the float64 reference of the same math (per
element, absolute and relative; per output, relative to the output's norm) and whether
every output met both of SPEC §4's bounds.

The NPU implementations ("npu", "npu_custom") run on device copies of each case; their
outputs come back to the host for the comparison. A case CANN is documented to refuse or
to compute differently (npu/documented.py) is reported as such in the row's "documented"
column and the notes below the table, not as a failure. An error on one case fails its row
with the error's first line and never ends the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import ops, testing
from ._impls import NPU_IMPLS, OP_IMPLS, available_impls
from .npu import documented

#: The device torch_npu registers (PrivateUse1 renamed "npu").
NPU_DEVICE = "npu"


@dataclass
class ParityRow:
    op: str
    impl: str
    dtype: str
    cases: int  # cases compared against the reference
    max_abs_error: float
    max_rel_error: float
    passed: bool
    worst: str  # the failing case and its worst element or error, or ""
    max_norm_error: float = 0.0  # the largest ‖ours − reference‖ / ‖reference‖ of an output
    notes: list[str] = field(default_factory=list)  # documented refusals / differences, or why not run
    refused: int = 0   # cases refused as documented
    differs: int = 0   # cases outside SPEC §4 as documented

    @property
    def documented(self) -> str:
        parts = [f"{self.refused} refused"] * bool(self.refused) + [f"{self.differs} differs"] * bool(self.differs)
        return ", ".join(parts) or "-"


def _clone(inputs: dict) -> dict:
    # High-performance mode may use softmax as scratch: give every run its own copy.
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def on_device(inputs: dict, impl: str) -> dict:
    """The inputs an implementation runs on: device copies for the NPU implementations."""
    if impl not in NPU_IMPLS:
        return _clone(inputs)
    return {k: v.to(NPU_DEVICE) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def _first_line(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}"


def _run_case(row: ParityRow, case, inputs: dict, run, oracle, naive) -> None:
    """One case into `row`: compared, refused as documented, or a failure."""
    try:
        outputs = tuple(None if o is None else o.cpu() for o in run(on_device(inputs, row.impl), row.impl))
    except Exception as error:  # noqa: BLE001 (a row's error is its result, not the run's end)
        refusal = documented.documented_refusal(row.op, row.impl, case, error)
        if refusal is None:
            if row.passed:
                row.passed, row.worst = False, f"{case.name} raised {_first_line(error)}"
            return
        row.refused += 1
        row.notes.append(f"{case.name} refused as documented ({refusal.limit}): {_first_line(error)[:200]}")
        return
    difference = documented.known_difference(row.op, row.impl, case)
    failures = []
    for index, (ours, ref, low) in enumerate(zip(outputs, oracle(inputs), naive(inputs))):
        if ours is None:
            continue
        result = testing.compare(ours, ref, low)
        if not result.passed:
            failures.append(f"{case.name} output out{index}: {result.message}")
        if result.passed or difference is None:
            row.max_abs_error = max(row.max_abs_error, result.max_abs_error)
            row.max_rel_error = max(row.max_rel_error, result.max_rel_error)
            row.max_norm_error = max(row.max_norm_error, result.norm_rel_error)
    if failures and difference is not None:
        row.differs += 1
        row.notes.append(f"{failures[0]} -- differs as documented: {difference.why}")
    elif failures:
        if row.passed:
            row.passed, row.worst = False, failures[0]
    row.cases += 0 if failures and difference is not None else 1


def _op_rows(op: str, impl: str, groups: dict, run, oracle, naive) -> list[ParityRow]:
    rows = []
    for dtype, cases in groups.items():
        row = ParityRow(op, impl, str(dtype).removeprefix("torch."), 0, 0.0, 0.0, True, "")
        for case, inputs in cases:
            _run_case(row, case, inputs, run, oracle, naive)
        rows.append(row)
    return rows


def _grids() -> list[tuple]:
    """(op, {dtype: [(case, inputs)]}, function, oracle, naive) for each operator."""
    def grouped(cases, make, key=lambda case: case.dtype):
        groups: dict = {}
        for case in cases:
            groups.setdefault(key(case), []).append((case, make(case)))
        return groups

    return [
        ("fused_linear_cross_entropy_loss_grad", grouped(testing.flce_cases(), testing.flce_inputs),
         ops.fused_linear_cross_entropy_loss_grad, testing.flce_oracle, testing.flce_naive),
        ("batch_norm_reduce_backward", grouped(testing.bn_cases(), testing.bn_inputs),
         ops.batch_norm_reduce_backward, testing.bn_oracle, testing.bn_naive),
        ("fused_linear_online_max_sum", grouped(testing.online_cases(), testing.online_inputs),
         ops.fused_linear_online_max_sum, testing.online_oracle, testing.online_naive),
        ("fused_cross_entropy_loss_with_max_sum",
         grouped(testing.loss_cases(), testing.loss_inputs,
                 key=lambda case: case.logits_dtype or torch.float32),
         ops.fused_cross_entropy_loss_with_max_sum, testing.loss_oracle, testing.loss_naive),
    ]


def parity_rows(impls: list[str] | None = None, op_names: list[str] | None = None) -> list[ParityRow]:
    """Run the parity grid for `impls` (default: every available implementation) and
    `op_names` (default: every operator). An implementation that cannot run an operator
    here gets one row saying why, with no cases."""
    status = available_impls()
    impls = impls or [name for name, s in status.items() if s.available]
    rows = []
    for impl in impls:
        for op, groups, function, oracle, naive in _grids():
            if impl not in OP_IMPLS[op] or (op_names and op not in op_names):
                continue  # e.g. sim implements only the backward operators
            why_not = available_impls(op)[impl]
            if not why_not.available:
                rows.append(ParityRow(op, impl, "-", 0, 0.0, 0.0, True, "",
                                      notes=[f"not run: {why_not.reason}"]))
                continue
            rows += _op_rows(op, impl, groups,
                             lambda inputs, impl, function=function: function(**inputs, impl=impl),
                             oracle, naive)
    return rows


def format_table(rows: list[ParityRow]) -> str:
    header = ("op", "impl", "dtype", "cases", "max abs err", "max rel err", "max norm err",
              "documented", "result")
    body = [(r.op, r.impl, r.dtype, str(r.cases), f"{r.max_abs_error:.3g}", f"{r.max_rel_error:.3g}",
             f"{r.max_norm_error:.3g}", r.documented, "pass" if r.passed else "FAIL")
            for r in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"note {r.op} [{r.impl}, {r.dtype}]: {note}" for r in rows for note in r.notes]
    failures = [f"FAIL {r.op} [{r.impl}, {r.dtype}]: {r.worst}" for r in rows if not r.passed]
    return "\n".join(lines + notes + failures)
