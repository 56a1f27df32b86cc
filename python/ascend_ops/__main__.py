"""`python -m ascend_ops`: the CPU and the GEMM engines its kernels chose (one per kind of
product, with every engine's measured speed), which implementations run here, and a
parity table of each against the float64 reference; with an NPU, the first-run
acceptance check (acceptance.py). Exits non-zero if any row fails SPEC §4's
tolerances, an acceptance row says "don't train yet", or no implementation can run.

    python -m ascend_ops                       # everything available here
    python -m ascend_ops --impl npu --op batch_norm_reduce_backward
    python -m ascend_ops --json > report.json  # the same, as one JSON document
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import torch

from . import __version__
from ._impls import IMPLS, NPU_IMPLS, OP_IMPLS, available_impls
from .cpu_info import cpu_info, describe_gemm_engine_cache, gemm_engine_report
from . import acceptance
from .parity import ParityRow, format_table, parity_rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ascend_ops",
        description="Which implementations of the ascend_ops operators run here, their parity "
                    "against the float64 reference (SPEC §4) and, with an NPU, the first-run "
                    "acceptance check (docs/npu.md).",
        epilog="Exit status: 0 when every parity row passes and no acceptance row says "
               "\"don't train yet\"; 1 otherwise, or when no implementation can run; 2 for "
               "an implementation that cannot run here or a bad argument.")
    parser.add_argument("--impl", action="append", choices=IMPLS, metavar="IMPL",
                        help=f"parity rows of this implementation only (repeatable; one of "
                             f"{', '.join(IMPLS)}; default: every available one). The "
                             "acceptance check runs when impl='npu' can run, unless every "
                             "--impl given is a CPU one")
    parser.add_argument("--op", action="append", choices=tuple(OP_IMPLS), metavar="OP",
                        help=f"parity rows of this operator only (repeatable; one of "
                             f"{', '.join(OP_IMPLS)})")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document (machine, implementations, parity rows, "
                             "acceptance rows, exit status) instead of the text report")
    return parser.parse_args(argv)


def machine() -> dict:
    """The lines above the tables: versions, the CPU, the GEMM engines its kernels chose."""
    facts = {"version": __version__, "torch": torch.__version__,
             "threads": torch.get_num_threads(), "cpu": cpu_info().describe()}
    try:
        facts["gemm_engines"] = gemm_engine_report().describe()
    except (RuntimeError, ValueError) as error:  # no native library, or a bad switch
        facts["gemm_engines_unavailable"] = str(error)
    facts["gemm_engine_cache"] = describe_gemm_engine_cache()
    return facts


def print_machine(facts: dict) -> None:
    print(f"ascend_ops {facts['version']} (torch {facts['torch']}, {facts['threads']} threads)")
    print(f"CPU: {facts['cpu']}")
    if "gemm_engines" in facts:
        print(f"CPU GEMM engines (bfloat16), per kind of product:\n  {facts['gemm_engines']}")
    else:
        print(f"CPU GEMM engine: unavailable: {facts['gemm_engines_unavailable']}")
    print(facts["gemm_engine_cache"])


def print_implementations(status: dict) -> None:
    print("\nImplementations:")
    for name, s in status.items():
        print(f"  {name:<10} {'available' if s.available else 'unavailable: ' + str(s.reason)}")


def _row_json(row: ParityRow) -> dict:
    return {**dataclasses.asdict(row), "documented": row.documented}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = available_impls()
    for name in args.impl or []:
        if not status[name].available:
            print(f"{name}: unavailable: {status[name].reason}", file=sys.stderr)
            return 2
    facts = machine()
    report: dict = {"machine": facts,
                    "implementations": {n: dataclasses.asdict(s) for n, s in status.items()}}
    if not args.json:
        print_machine(facts)
        print_implementations(status)
    if not any(s.available for s in status.values()):
        if not args.json:
            print("\nno implementation can run: nothing to compare")
        report["exit_status"] = 1
        if args.json:
            print(json.dumps(report, indent=2))
        return 1

    if not args.json:
        print("\nParity against the float64 reference (SPEC §4 tolerances):", flush=True)
    rows = parity_rows(args.impl, args.op)
    failed = sum(not r.passed for r in rows)
    documented = sum(r.refused + r.differs for r in rows)
    if not args.json:
        print(format_table(rows))
        print(f"\n{len(rows) - failed} of {len(rows)} parity rows within tolerance"
              + (f" ({documented} cases refused or differing as documented, see the notes)"
                 if documented else ""))
    report["parity"] = [_row_json(r) for r in rows]

    # The acceptance check runs whatever the parity rows did: a failed row above is one
    # more reason to read it, not a reason to skip it.
    wants_npu = args.impl is None or any(name in NPU_IMPLS for name in args.impl)
    stops = 0
    if wants_npu:
        if args.json:
            result = acceptance.run()
            stops = result.stops
            report["acceptance"] = {
                "not_run": result.not_run,
                "rows": [{"name": r.case.name, "impl": r.case.impl, "status": r.status,
                          "detail": r.detail, "seconds": r.seconds,
                          "stops_training": r.stops_training} for r in result.rows]}
        else:
            stops = acceptance.report()
    code = 1 if failed or stops else 0
    if args.json:
        report["exit_status"] = code
        print(json.dumps(report, indent=2))
    return code


if __name__ == "__main__":
    sys.exit(main())
