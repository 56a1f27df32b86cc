"""`python -m ascend_ops`: the CPU and the GEMM engines its kernels chose (one per kind of
product, with every engine's measured speed), which implementations run here, and a
parity table of each against the float64 reference; with an NPU, the first-run
acceptance check (npu/acceptance.py). Exits non-zero if any row fails SPEC §4's
tolerances, an acceptance row says "don't train yet", or no implementation can run."""

from __future__ import annotations

import sys

import torch

from . import __version__
from ._impls import available_impls
from .cpu_info import cpu_info, describe_gemm_engine_cache, gemm_engine_report
from .npu.acceptance import report as npu_acceptance_report
from .parity import format_table, parity_rows


def main() -> int:
    print(f"ascend_ops {__version__} (torch {torch.__version__}, {torch.get_num_threads()} threads)")
    print(f"CPU: {cpu_info().describe()}")
    try:
        print(f"CPU GEMM engines (bfloat16), per kind of product:\n  {gemm_engine_report().describe()}")
    except (RuntimeError, ValueError) as error:  # no native library, or a bad switch
        print(f"CPU GEMM engine: unavailable: {error}")
    print(describe_gemm_engine_cache())
    print("\nImplementations:")
    status = available_impls()
    for name, s in status.items():
        print(f"  {name:<10} {'available' if s.available else 'unavailable: ' + str(s.reason)}")
    if not any(s.available for s in status.values()):
        print("\nno implementation can run: nothing to compare")
        return 1
    print("\nParity against the float64 reference (SPEC §4 tolerances):")
    rows = parity_rows()
    print(format_table(rows))
    failed = sum(not r.passed for r in rows)
    print(f"\n{len(rows) - failed} of {len(rows)} parity rows within tolerance")
    stops = npu_acceptance_report()
    return 1 if failed or stops else 0


if __name__ == "__main__":
    sys.exit(main())
