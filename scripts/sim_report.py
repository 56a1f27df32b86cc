#!/usr/bin/env python
"""Modelled Atlas A2 (910B) cost of the Ascend C kernels.

batch_norm_reduce_backward: from the simulator's counters of one launch. Its footprint
fits in L2 (192 MiB), so each input sector is read from HBM once and each output sector
written once ("HBM MB"); every access is L2 traffic ("L2 MB").

    time = max(HBM bytes / 1.6 TB/s, L2 bytes / 7 TB/s, busiest vector core's 256-byte repeats / 1.85 GHz)

fused_linear_cross_entropy_loss_grad: from the cost model (ascendc_kernels/sim/host/
flce_model.cpp), which takes the FLCE TilingFunc's tiling data and walks the kernel's own
order of work (op_kernel/…_schedule.h) at any shape without computing an element: L2 is an
LRU cache of 512-byte lines (misses read from HBM, dirty lines written back), the cores'
Matmul slices, DMAs and vector instructions reach it in the order of their modelled start
times, fixpipe atomic adds are read-modify-writes in L2 (with the most cores adding into
one line within a step: the contention), and every step of the kernel (between its
barriers) takes the longest of its busiest core, its HBM bytes at 1.6 TB/s and its L2 bytes
at 7 TB/s. The tests check the model's FLOPs, traffic and vector repeats against the
simulator's counts at small shapes (tests/test_ascendc_sim.py). The table sets it next to
the cube roofline: all FLOPs at the chip's 313 TFLOP/s.

Every figure (L2 size and bandwidth, HBM bandwidth, peak, clock, core counts) is read from
the one platform description, ascendc_kernels/common/platform.h, through the simulator
library. Assumptions, not measurements: launch overhead, barrier and flag latency, DMA
efficiency and pipeline stalls are not modelled: read the times as lower bounds.

    python scripts/sim_report.py                  # markdown tables (the FLCE shapes take a few minutes)
    python scripts/sim_report.py --csv out.csv
    python scripts/sim_report.py --flce 8192,4096,32000 --line-bytes 64
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from dataclasses import asdict, dataclass

import torch

from ascend_ops import testing
from ascend_ops.sim import cann_tiling as _cann_tiling
from ascend_ops.sim import simulator as _sim
from ascend_ops.testing import BnCase

# The modelling facts come from the one platform description (ascendc_kernels/common/
# platform.h, read through the simulator library), the one the tilings and the simulator use.
_A2 = _sim.platform_910b() if _sim.load_error is None else None
HBM_BYTES_PER_S = _A2.hbmBytesPerS if _A2 else float("nan")
L2_BYTES_PER_S = _A2.l2BytesPerS if _A2 else float("nan")
VECTOR_CORES = _A2.vectorCores if _A2 else 0
VECTOR_REPEATS_PER_S = _A2.vectorClockHz if _A2 else float("nan")

#: (BT, H, V) of the FLCE rows: three sizes people train at, then two small ones.
FLCE_SHAPES = [(8192, 4096, 32000), (16384, 8192, 16000), (4096, 5120, 19008), (256, 512, 4096), (1000, 256, 5000)]


@dataclass
class BnRow:
    shape: str
    dtype: str
    hbm_bytes: int
    minimal_bytes: int
    l2_bytes: int
    ub_high_water: int
    modelled_us: float
    bound: str
    vector_util: float


def bn_row(shape: tuple[int, ...], dtype: torch.dtype) -> BnRow:
    inputs = testing.bn_inputs(BnCase(shape, dtype, torch.float32))
    _sim.batch_norm_reduce_backward(*inputs.values())
    c = _sim.last_counters()
    elem = torch.finfo(dtype).bits // 8
    channels = shape[1]
    # dy and x once; fp32 mean and invstd; four fp32 sums.
    minimal = 2 * math.prod(shape) * elem + 2 * channels * 4 + 4 * channels * 4
    l2 = c.gm_read_bytes + c.gm_write_bytes
    times = {"HBM": c.touched_data_bytes / HBM_BYTES_PER_S, "L2": l2 / L2_BYTES_PER_S,
             "vector": c.max_block_vector_repeats / VECTOR_REPEATS_PER_S}
    bound = max(times, key=times.get)
    t = times[bound]
    return BnRow("x".join(map(str, shape)), str(dtype).removeprefix("torch."), c.touched_data_bytes, minimal, l2,
                 c.ub_high_water, t * 1e6, bound, c.vector_repeats / (VECTOR_CORES * VECTOR_REPEATS_PER_S * t))


@dataclass
class FlceRow:
    shape: str
    mode: str
    windows: str           # memory-saving: window (tasks) and how many; high-performance: "-"
    roofline_ms: float     # all cube FLOPs at the chip's peak
    modelled_ms: float
    ratio: float
    cube_ms: float         # the steps each term bound, their time
    vector_ms: float
    hbm_ms: float
    l2_ms: float
    hbm_gb: float          # misses and write-backs
    l2_gb: float           # every access (an atomic add twice: read and write)
    atomic_gb: float       # fixpipe atomic adds
    max_line_adders: int   # the most cores adding into one L2 line within a step
    workspace_mib: float   # the TilingFunc's, system part included
    cann_workspace_mib: float


def flce_row(bt: int, h: int, v: int, mode: str, line_bytes: int = 512) -> FlceRow:
    ms = mode == testing.MEMORY_SAVING
    m = _sim.flce_model(bt, h, v, torch.bfloat16, ms, line_bytes=line_bytes)
    tiling = _sim.flce_tiling_func(bt, h, v, torch.bfloat16, ms, True)
    d = _sim.flce_tiling_data(tiling)
    windows = f"{d.windowRowBlocks}x{d.windowColBlocks} ({d.windows})" if ms else "-"
    return FlceRow(f"{bt}x{h}x{v}", mode, windows, m.roofline_s * 1e3, m.modelled_s * 1e3,
                   m.modelled_s / m.roofline_s, m.cube_bound_s * 1e3, m.vector_bound_s * 1e3, m.hbm_bound_s * 1e3,
                   m.l2_bound_s * 1e3, (m.hbm_read_bytes + m.hbm_write_bytes) / 1e9,
                   (m.l2_read_bytes + m.l2_write_bytes + m.atomic_add_bytes) / 1e9, m.atomic_add_bytes / 1e9,
                   m.max_line_adders, tiling.workspace_bytes / 2**20,
                   _cann_tiling.cann_flce_workspace_bytes(bt, h, v, 0 if ms else 1) / 2**20)


def bn_rows() -> list[BnRow]:
    return [bn_row((32, 64, 28, 28), torch.float32), bn_row((32, 64, 28, 28), torch.bfloat16),
            bn_row((8, 3, 224, 224), torch.float16),   # 3 channels split over 48 cores
            bn_row((16, 2048, 7, 7), torch.float32),   # many channels, short rows
            bn_row((4096, 256), torch.float32)]        # S = 1: one element per channel-row


def flce_rows(shapes, line_bytes: int = 512) -> list[FlceRow]:
    return [flce_row(*shape, mode, line_bytes) for shape in shapes
            for mode in (testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE)]


def markdown_bn(table: list[BnRow]) -> str:
    lines = ["| shape | dtype | HBM MB | minimal MB | ratio | L2 MB | UB KiB | modelled µs | bound | vec % |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r.shape} | {r.dtype} | {r.hbm_bytes / 1e6:.2f} | {r.minimal_bytes / 1e6:.2f} | "
                     f"{r.hbm_bytes / r.minimal_bytes:.2f} | {r.l2_bytes / 1e6:.2f} | {r.ub_high_water / 1024:.1f} | "
                     f"{r.modelled_us:.1f} | {r.bound} | {100 * r.vector_util:.0f} |")
    return "\n".join(lines)


def markdown_flce(table: list[FlceRow]) -> str:
    lines = ["| (BT, H, V) | mode | window (windows) | cube roofline ms | modelled ms | ratio | cube / vector / HBM / L2-bound ms "
             "| HBM GB | L2 GB | atomic GB | max adders a line | workspace MiB | CANN's MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r.shape} | {r.mode} | {r.windows} | {r.roofline_ms:.3f} | {r.modelled_ms:.3f} | "
                     f"{r.ratio:.3f} | {r.cube_ms:.2f} / {r.vector_ms:.2f} / {r.hbm_ms:.2f} / {r.l2_ms:.2f} | "
                     f"{r.hbm_gb:.2f} | {r.l2_gb:.1f} | {r.atomic_gb:.2f} | {r.max_line_adders} | "
                     f"{r.workspace_mib:.0f} | {r.cann_workspace_mib:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", help="also write the FLCE rows to this CSV file")
    parser.add_argument("--flce", action="append", help="an FLCE shape BT,H,V (repeatable; default: FLCE_SHAPES)")
    parser.add_argument("--line-bytes", type=int, default=512, help="the L2 line of the FLCE model (64 or 512)")
    parser.add_argument("--no-bn", action="store_true", help="leave out the batch-norm rows")
    args = parser.parse_args(argv)
    if _sim.load_error:
        print(_sim.load_error, file=sys.stderr)
        return 2
    if not args.no_bn:
        print(markdown_bn(bn_rows()))
        print()
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.flce] if args.flce else FLCE_SHAPES
    table = flce_rows(shapes, args.line_bytes)
    print(markdown_flce(table))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(asdict(table[0])))
            writer.writeheader()
            for r in table:
                writer.writerow(asdict(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
