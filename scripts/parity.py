#!/usr/bin/env python
"""Parity of every available implementation against the float64 reference.

Two tables, both against SPEC §4's tolerances:
  samples: the table of `python -m ascend_ops` (the shared sample cases, one row per op,
           implementation and dtype); --csv appends its rows to a CSV file;
  edges:   one row per op, implementation and edge case: V < 128, H > 65535, BT = 0 and
           V one past the high-performance limit (shapes CANN's built-ins treat specially),
           in both modes and both half dtypes; --edges-csv appends them. An error is a
           failure unless it is one of the documented refusals of
           ascend_ops.npu.documented (only CANN's built-in has any, through torch_npu or
           our adapter, as ascend_ops.npu.limits derives them); then the row is
           "refused", with the limit and the error. For high-performance mode the "softmax" column says whether the
           call overwrote the caller's softmax (SPEC allows it).

On an NPU, "torch_npu" rows run torch_npu's own operators (CANN's built-in aclnn op through
torch_npu's adapter) beside ours: "npu" (our adapter on CANN's built-in) and, when our
Ascend C op package is installed, "npu_custom" (the same adapter on the package). Exits 1
if any row fails.

    python scripts/parity.py                          # every available implementation
    python scripts/parity.py --impl cpu --csv parity.csv
    python scripts/parity.py --grid edges --edges-csv edges.csv   # on NPU
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import pathlib
import platform
import sys
import torch

import ascend_ops
from ascend_ops import testing
from ascend_ops.npu import limits as npu_limits
from ascend_ops.npu.documented import documented_refusal
from ascend_ops.parity import NPU_DEVICE, ParityRow, format_table, parity_rows
from ascend_ops.testing import HIGH_PERFORMANCE, MEMORY_SAVING, BnCase, FlceCase

MACHINE = platform.node() or platform.machine()
TORCH_NPU_OPS = {  # our op -> the torch_npu operator backed by CANN's built-in aclnn op
    "fused_linear_cross_entropy_loss_grad": "npu_fused_linear_cross_entropy_loss_with_max_sum_backward",
    "batch_norm_reduce_backward": "batch_norm_backward_reduce",
}


def edge_flce_cases() -> list[FlceCase]:
    """V < 128, H > 65535, BT = 0 and V past the high-performance limit, each in both
    modes and both half dtypes."""
    over = npu_limits.builtin_limits()["flce_grad_high_perf_max_vocab"] + 1
    cases = []
    for dtype in (torch.float16, torch.bfloat16):
        for mode in (MEMORY_SAVING, HIGH_PERFORMANCE):
            cases += [
                FlceCase(24, 40, 100, dtype, mode),                 # V = 100 < 128
                FlceCase(4, 65537, 130, dtype, mode, "bool"),       # H = 65537 > 65535
                FlceCase(0, 32, 256, dtype, mode),                  # BT = 0
                FlceCase(16, 64, 128, dtype, mode, "packed", torch.int32),  # V = 128: the limit
                FlceCase(4, 16, over, dtype, mode),                 # V past the UB's rows
            ]
    return cases


def edge_bn_cases() -> list[BnCase]:
    return [BnCase((0, 4, 3), dtype, dtype) for dtype in (torch.float32, torch.float16, torch.bfloat16)] + \
        [BnCase((2, 3, 70000), torch.float32)]  # a long spatial dim


@dataclasses.dataclass
class EdgeRow:
    op: str
    impl: str
    case: str
    max_abs_error: float
    max_rel_error: float
    softmax: str  # "kept", "overwritten" or "" (memory-saving mode)
    result: str   # "pass", "FAIL" or "refused" (a documented refusal)
    detail: str   # the worst element, the error, or the documented limit and the error


def on_device(inputs: dict, device: str) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def run(op: str, impl: str, inputs: dict):
    """Outputs of `op` by `impl` (ours, or "torch_npu": torch_npu's own operator) on CPU."""
    if impl == "torch_npu":
        args = on_device(inputs, NPU_DEVICE)
        if op == "batch_norm_reduce_backward":
            outputs = torch.batch_norm_backward_reduce(*args.values())
        else:
            outputs = getattr(torch.ops.npu, TORCH_NPU_OPS[op])(**args)
    else:
        args = on_device(inputs, NPU_DEVICE) if impl.startswith("npu") else inputs
        outputs = getattr(ascend_ops, op)(**args, impl=impl)
    return args, tuple(None if o is None else o.cpu() for o in outputs)


def edge_rows(impls: list[str]) -> list[EdgeRow]:
    grids = [("fused_linear_cross_entropy_loss_grad", edge_flce_cases(), testing.flce_inputs,
              testing.flce_oracle, testing.flce_naive),
             ("batch_norm_reduce_backward", edge_bn_cases(), testing.bn_inputs,
              testing.bn_oracle, testing.bn_naive)]
    rows = []
    for op, cases, make, oracle, naive in grids:
        for case in cases:
            inputs = make(case)
            expected, low = oracle(inputs), naive(inputs)
            for impl in impls:
                copy = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
                row = EdgeRow(op, impl, case.name, 0.0, 0.0, "", "pass", "")
                try:
                    args, outputs = run(op, impl, copy)
                except Exception as error:  # noqa: BLE001 (any error fails unless documented)
                    first_line = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
                    refusal = documented_refusal(op, impl, case, error)
                    if refusal is None:
                        row.result, row.detail = "FAIL", f"raised {first_line} (no documented refusal)"
                    else:
                        row.result, row.detail = "refused", f"{refusal.limit}: {first_line}"
                    rows.append(row)
                    continue
                if copy.get("softmax") is not None:
                    kept = torch.equal(args["softmax"].cpu(), inputs["softmax"])
                    row.softmax = "kept" if kept else "overwritten"
                for index, (ours, ref, naive_out) in enumerate(zip(outputs, expected, low)):
                    if ref is None:
                        continue
                    result = testing.compare(ours, ref, naive_out)
                    row.max_abs_error = max(row.max_abs_error, result.max_abs_error)
                    row.max_rel_error = max(row.max_rel_error, result.max_rel_error)
                    if not result.passed and row.result == "pass":
                        row.result, row.detail = "FAIL", f"output {index}: {result.message}"
                rows.append(row)
    return rows


def format_edges(rows: list[EdgeRow]) -> str:
    header = ("op", "impl", "case", "max abs err", "max rel err", "softmax", "result")
    body = [(r.op, r.impl, r.case, f"{r.max_abs_error:.3g}", f"{r.max_rel_error:.3g}",
             r.softmax or "-", r.result) for r in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"{r.result} {r.op} [{r.impl}, {r.case}]: {r.detail}" for r in rows if r.detail]
    return "\n".join(lines + notes)


def append_csv(path: pathlib.Path, rows: list, fields: list[str]) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["machine", "torch"] + fields)
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({"machine": MACHINE, "torch": torch.__version__, **dataclasses.asdict(row)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", action="append", choices=ascend_ops.IMPLS,
                        help="implementation to check (repeatable; default: all available)")
    parser.add_argument("--grid", choices=("samples", "edges", "all"), default="all")
    parser.add_argument("--csv", type=pathlib.Path, help="append the samples rows to this CSV file")
    parser.add_argument("--edges-csv", type=pathlib.Path, help="append the edge rows to this CSV file")
    args = parser.parse_args(argv)

    status = ascend_ops.available_impls()
    for name in args.impl or []:
        if not status[name].available:
            print(f"{name}: unavailable: {status[name].reason}", file=sys.stderr)
            return 2
    impls = args.impl or [name for name, s in status.items() if s.available]
    passed = True
    if args.grid in ("samples", "all"):
        rows = parity_rows(impls)
        print(format_table(rows))
        passed &= all(r.passed for r in rows)
        if args.csv:
            append_csv(args.csv, rows, [f.name for f in dataclasses.fields(ParityRow)])
    if args.grid in ("edges", "all"):
        edge_impls = list(impls)
        if "npu" in impls:
            edge_impls.append("torch_npu")
        rows = edge_rows(edge_impls)
        print("\nEdge cases (V < 128, H > 65535, BT = 0, V past the high-performance limit):")
        print(format_edges(rows))
        passed &= all(r.result != "FAIL" for r in rows)
        if args.edges_csv:
            append_csv(args.edges_csv, rows, [f.name for f in dataclasses.fields(EdgeRow)])
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
