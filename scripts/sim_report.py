#!/usr/bin/env python
"""Modelled Atlas A2 (910B) cost of the Ascend C kernels.

Every rate is a range: common/platform.h holds the fast and the slow end the public
sources give (ChipRates, each figure with its source: CANN's platform tables for the clock,
L2 and per-core rates, the AscendC guide's measured Matmul fill rate, the HBM2e standard),
and each time and ratio below is given at both ends, fast–slow.

batch_norm_reduce_backward: from the simulator's counters of one launch. Its footprint
fits in L2 (192 MiB), so each input sector is read from HBM once and each output sector
written once ("HBM MB"); every access is L2 traffic ("L2 MB").

    time = max(HBM bytes / HBM rate, L2 reads / L2 read rate + L2 writes / L2 write rate,
               busiest vector core's 256-byte repeats / clock)

fused_linear_cross_entropy_loss_grad: from the cost model (ascendc_kernels/sim/host/
flce_model.cpp), which takes the FLCE TilingFunc's tiling data and walks the kernel's own
order of work (op_kernel/…_schedule.h) at any shape without computing an element: L2 is an
LRU cache of 512-byte lines (misses read from HBM, dirty lines written back), the cores'
Matmul slices, DMAs and vector instructions reach it in the order of their modelled start
times, fixpipe atomic adds are read-modify-writes in L2 (with the most cores adding into
one line within a step: the contention), each Matmul call (IterateAll) pays its first L1
fill and its fixpipe drain around its mmads, its operands' fills hold the mmads back when
they are slower, and every step of the kernel (between its barriers) takes the longest of
its busiest core, its HBM bytes and its L2 reads and writes at their rates. The tests check
the model's FLOPs, traffic and vector repeats against the simulator's counts at small
shapes, with and without the loss options (tests/test_ascendc_sim.py). The tables set it
next to the cube roofline: all FLOPs at 24 cores x 8192 FLOP a cycle at the end's clock.

Every figure is read from the one platform description, ascendc_kernels/common/platform.h,
through the simulator library. Not modelled: launch overhead, barrier and flag latency,
DMA first-byte latency: read the times as lower bounds at each end.

    python scripts/sim_report.py                  # markdown tables (the FLCE shapes take several minutes)
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
VECTOR_CORES = _A2.vectorCores if _A2 else 0
ENDS = _sim.RATE_ENDS  # ("fast", "slow")

#: (BT, H, V) of the FLCE rows: three sizes people train at, then two small ones.
TRAINING_SHAPES = [(8192, 4096, 32000), (16384, 8192, 16000), (4096, 5120, 19008)]
FLCE_SHAPES = TRAINING_SHAPES + [(256, 512, 4096), (1000, 256, 5000)]


@dataclass
class BnRow:
    shape: str
    dtype: str
    hbm_bytes: int
    minimal_bytes: int
    l2_bytes: int
    ub_high_water: int
    modelled_us: tuple[float, float]  # fast, slow
    bound: str                        # at the slow end
    vector_util: float                # at the slow end


def bn_row(shape: tuple[int, ...], dtype: torch.dtype) -> BnRow:
    inputs = testing.bn_inputs(BnCase(shape, dtype, torch.float32))
    _sim.batch_norm_reduce_backward(*inputs.values())
    c = _sim.last_counters()
    elem = torch.finfo(dtype).bits // 8
    channels = shape[1]
    # dy and x once; fp32 mean and invstd; four fp32 sums.
    minimal = 2 * math.prod(shape) * elem + 2 * channels * 4 + 4 * channels * 4
    times = {}
    for end in ENDS:
        r = _sim.chip_rates(end)
        reads, writes = c.gm_read_bytes / r.l2ReadBytesPerS, c.gm_write_bytes / r.l2WriteBytesPerS
        times[end] = {"HBM": c.touched_data_bytes / r.hbmBytesPerS,
                      "L2": reads + writes if r.l2PortsShared else max(reads, writes),
                      "vector": c.max_block_vector_repeats / r.clockHz}
    slow = times["slow"]
    bound = max(slow, key=slow.get)
    return BnRow("x".join(map(str, shape)), str(dtype).removeprefix("torch."), c.touched_data_bytes, minimal,
                 c.gm_read_bytes + c.gm_write_bytes, c.ub_high_water,
                 tuple(max(times[end].values()) * 1e6 for end in ENDS), bound,
                 c.vector_repeats / (VECTOR_CORES * _sim.chip_rates("slow").clockHz * slow[bound]))


@dataclass
class FlceRow:
    shape: str
    mode: str
    options: str           # the loss options modelled ("-": none)
    windows: str           # memory-saving: window (tasks) and how many; high-performance: "-"
    roofline_ms: tuple[float, float]  # all cube FLOPs at the chip's peak, fast and slow end
    modelled_ms: tuple[float, float]
    ratio: tuple[float, float]
    calls: int             # Matmul calls (IterateAll), all cube cores
    core_calls: int        # the busiest cube core's
    fill_us: tuple[float, float]      # per call: first L1 fill, fixpipe drain, mmads, operand waits
    drain_us: tuple[float, float]
    mmad_us: tuple[float, float]
    wait_us: tuple[float, float]
    bound_ms: str          # slow end: ms of steps bound by cube / vector / HBM / L2
    hbm_gb: float          # misses and write-backs (fast end; the traffic does not depend on the rates)
    l2_gb: float           # every access (an atomic add twice: read and write)
    atomic_gb: float       # fixpipe atomic adds
    max_line_adders: int   # the most cores adding into one L2 line within a step
    workspace_mib: float   # the TilingFunc's, system part included
    cann_workspace_mib: float


#: The loss options of the options rows (all four memory-saving mode takes; high-performance
#: mode takes no soft-cap, and its bias is in the softmax).
def _options(bt: int, v: int, memory_saving: bool) -> _sim.FlceOptions:
    ones = torch.ones(bt)
    return _sim.FlceOptions(ones, ones, ones, torch.zeros(v) if memory_saving else None, torch.ones(v), 0.7,
                            30.0 if memory_saving else 0.0)


def _option_names(memory_saving: bool) -> str:
    return "bias, class weights, scale, soft-cap" if memory_saving else "class weights, scale"


def flce_row(bt: int, h: int, v: int, mode: str, line_bytes: int = 512, options: bool = False) -> FlceRow:
    ms = mode == testing.MEMORY_SAVING
    o = _options(bt, v, ms) if options else None
    m = {end: _sim.flce_model(bt, h, v, torch.bfloat16, ms, line_bytes=line_bytes, rates=end, options=o)
         for end in ENDS}
    tiling = _sim.flce_tiling_func(bt, h, v, torch.bfloat16, ms, True, options=o)
    d = _sim.flce_tiling_data(tiling)
    windows = f"{d.windowRowBlocks}x{d.windowColBlocks} ({d.windows})" if ms else "-"
    fast, slow = m["fast"], m["slow"]

    def both(f):
        return tuple(f(m[end]) for end in ENDS)

    per_call = lambda name: both(lambda x: getattr(x, name) / x.calls * 1e6)  # noqa: E731
    return FlceRow(f"{bt}x{h}x{v}", mode, _option_names(ms) if options else "-", windows,
                   both(lambda x: x.roofline_s * 1e3), both(lambda x: x.modelled_s * 1e3),
                   both(lambda x: x.modelled_s / x.roofline_s), fast.calls, fast.max_core_calls,
                   per_call("fill_s"), per_call("drain_s"), per_call("mmad_s"), per_call("operand_wait_s"),
                   f"{slow.cube_bound_s * 1e3:.2f} / {slow.vector_bound_s * 1e3:.2f} / {slow.hbm_bound_s * 1e3:.2f} / "
                   f"{slow.l2_bound_s * 1e3:.2f}",
                   (fast.hbm_read_bytes + fast.hbm_write_bytes) / 1e9,
                   (fast.l2_read_bytes + fast.l2_write_bytes + fast.atomic_add_bytes) / 1e9, fast.atomic_add_bytes / 1e9,
                   fast.max_line_adders, tiling.workspace_bytes / 2**20,
                   _cann_tiling.cann_flce_workspace_bytes(bt, h, v, 0 if ms else 1) / 2**20)


@dataclass
class WhatIfRow:
    """The ratio at the slow end with some operands read from NZ copies (a what-if of the
    model, FLCE_LAYOUTS: the kernel reads every operand in ND)."""

    shape: str
    mode: str
    ratios: dict[str, float]  # layouts -> ratio


def what_if_row(bt: int, h: int, v: int, mode: str) -> WhatIfRow:
    ms = mode == testing.MEMORY_SAVING
    ratios = {}
    for layouts in _sim.FLCE_LAYOUTS:
        x = _sim.flce_model(bt, h, v, torch.bfloat16, ms, rates="slow", layouts=layouts)
        ratios[layouts] = x.modelled_s / x.roofline_s
    return WhatIfRow(f"{bt}x{h}x{v}", mode, ratios)


def bn_rows() -> list[BnRow]:
    return [bn_row((32, 64, 28, 28), torch.float32), bn_row((32, 64, 28, 28), torch.bfloat16),
            bn_row((8, 3, 224, 224), torch.float16),   # 3 channels split over 48 cores
            bn_row((16, 2048, 7, 7), torch.float32),   # many channels, short rows
            bn_row((4096, 256), torch.float32)]        # S = 1: one element per channel-row


MODES = (testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE)


def flce_rows(shapes, line_bytes: int = 512, options: bool = True) -> list[FlceRow]:
    rows = [flce_row(*shape, mode, line_bytes) for shape in shapes for mode in MODES]
    if options:  # the loss options' launch at the training shapes
        rows += [flce_row(*shape, mode, line_bytes, options=True) for shape in shapes if shape in TRAINING_SHAPES
                 for mode in MODES]
    return rows


def _range(pair: tuple[float, float], digits: int) -> str:
    return f"{pair[0]:.{digits}f}–{pair[1]:.{digits}f}"


def markdown_bn(table: list[BnRow]) -> str:
    lines = ["| shape | dtype | HBM MB | minimal MB | ratio | L2 MB | UB KiB | modelled µs (fast–slow) | bound (slow) "
             "| vec % (slow) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r.shape} | {r.dtype} | {r.hbm_bytes / 1e6:.2f} | {r.minimal_bytes / 1e6:.2f} | "
                     f"{r.hbm_bytes / r.minimal_bytes:.2f} | {r.l2_bytes / 1e6:.2f} | {r.ub_high_water / 1024:.1f} | "
                     f"{_range(r.modelled_us, 1)} | {r.bound} | {100 * r.vector_util:.0f} |")
    return "\n".join(lines)


def markdown_flce(table: list[FlceRow]) -> str:
    lines = ["| (BT, H, V) | mode | options | window (windows) | cube roofline ms | modelled ms | ratio | calls (per core) "
             "| per call µs: fill / drain / mmad / operand wait (fast–slow) | cube / vector / HBM / L2-bound ms (slow) "
             "| HBM GB | L2 GB | atomic GB | max adders a line | workspace MiB | CANN's MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r.shape} | {r.mode} | {r.options} | {r.windows} | {_range(r.roofline_ms, 3)} | "
                     f"{_range(r.modelled_ms, 3)} | **{_range(r.ratio, 3)}** | {r.calls} ({r.core_calls}) | "
                     f"{_range(r.fill_us, 2)} / {_range(r.drain_us, 2)} / {_range(r.mmad_us, 2)} / "
                     f"{_range(r.wait_us, 2)} | {r.bound_ms} | {r.hbm_gb:.2f} | {r.l2_gb:.1f} | {r.atomic_gb:.2f} | "
                     f"{r.max_line_adders} | {r.workspace_mib:.0f} | {r.cann_workspace_mib:.0f} |")
    return "\n".join(lines)


def markdown_what_if(table: list[WhatIfRow]) -> str:
    names = list(_sim.FLCE_LAYOUTS)
    lines = ["| (BT, H, V) | mode | " + " | ".join(f"ratio, slow end: {n}" for n in names) + " |",
             "|---|---|" + "---|" * len(names)]
    for r in table:
        lines.append(f"| {r.shape} | {r.mode} | " + " | ".join(f"{r.ratios[n]:.3f}" for n in names) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", help="also write the FLCE rows to this CSV file")
    parser.add_argument("--flce", action="append", help="an FLCE shape BT,H,V (repeatable; default: FLCE_SHAPES)")
    parser.add_argument("--line-bytes", type=int, default=512, help="the L2 line of the FLCE model (64 or 512)")
    parser.add_argument("--no-bn", action="store_true", help="leave out the batch-norm rows")
    parser.add_argument("--no-what-if", action="store_true", help="leave out the NZ what-if table")
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
    if not args.no_what_if:
        print()
        print(markdown_what_if([what_if_row(*shape, mode) for shape in shapes if shape in TRAINING_SHAPES
                                for mode in MODES]))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(asdict(table[0])))
            writer.writeheader()
            for r in table:
                writer.writerow(asdict(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
