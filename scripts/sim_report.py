#!/usr/bin/env python
"""Modelled Atlas A2 (910B) cost of the Ascend C kernels, from the simulator's counters.

For each op and shape: the GM traffic of its one launch, split by the L2 model below,
next to the operator's minimal HBM traffic (every input read once, every output written
once), the UB high-water mark, cube work, and a roofline time with utilisations.

The L2 model (A2: 192 MB of L2 per the AscendC docs). Every GM access of the kernel --
DMA, scalar access, Matmul operand load, fixpipe store -- is L2 traffic ("L2 MB"). When
the launch's footprint (the 32-byte sectors of inputs, outputs and workspace it touches)
fits in L2, each input sector is read from HBM once and each output sector written once
("HBM MB"); all re-reads (x and w by every task's GEMMs, G, the fp32 accumulators) are L2
hits, shown in "L2 MB", not hidden. The workspace (FLCE: the per-core ring and the fp32
accumulators) is assumed to stay in L2 for the kernel's duration; "ws MB" is its
footprint, which a later eviction of dirty lines could add to HBM. When the footprint
does not fit, every access is counted as HBM (no reuse: a pessimistic bound).

    time = max(HBM bytes / 1.6 TB/s, L2 bytes / 7 TB/s, busiest cube core's FLOPs / (313 TFLOP/s / 24),
               busiest vector core's 256-byte repeats / 1.85 GHz)

cube % and vec % are the chip's utilisation at that time (all 24 cube cores at 313
TFLOP/s fp16/bf16; all 48 vector cores at one repeat per cycle). Every figure here (L2
size and bandwidth, HBM bandwidth, peak, clock, core counts) is read from the one
platform description, ascendc_kernels/common/platform.h, through the simulator library.
Assumptions, not measurements: launch overhead, DMA efficiency, pipeline stalls and the
overlap of the stages are not modelled (the max assumes perfect overlap): read it as a
lower bound.

    python scripts/sim_report.py            # markdown table
    python scripts/sim_report.py --csv out.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from dataclasses import asdict, dataclass

import torch

from ascend_ops import testing
from ascend_ops.sim import simulator as _sim
from ascend_ops.testing import BnCase, FlceCase

# The modelling facts come from the one platform description (ascendc_kernels/common/
# platform.h, read through the simulator library), the one the tilings and the simulator use.
_A2 = _sim.platform_910b() if _sim.load_error is None else None
HBM_BYTES_PER_S = _A2.hbmBytesPerS if _A2 else float("nan")
L2_BYTES_PER_S = _A2.l2BytesPerS if _A2 else float("nan")
L2_BYTES = _A2.l2Bytes if _A2 else 0
CUBE_FLOPS = _A2.cubeFlopsPerS if _A2 else float("nan")
CUBE_CORES = _A2.aiCores if _A2 else 0
VECTOR_CORES = _A2.vectorCores if _A2 else 0
VECTOR_REPEATS_PER_S = _A2.vectorClockHz if _A2 else float("nan")


@dataclass
class Row:
    op: str
    shape: str
    dtype: str
    hbm_bytes: int
    minimal_bytes: int
    l2_bytes: int
    workspace_bytes: int
    fits_l2: bool
    ub_high_water: int
    cube_gflop: float
    modelled_us: float
    bound: str
    cube_util: float
    vector_util: float

    @property
    def traffic_ratio(self) -> float:
        return self.hbm_bytes / self.minimal_bytes


def _modelled(c: _sim.Counters) -> dict:
    l2 = c.gm_read_bytes + c.gm_write_bytes
    fits = c.touched_data_bytes + c.touched_workspace_bytes <= L2_BYTES
    hbm = c.touched_data_bytes if fits else l2
    times = {"HBM": hbm / HBM_BYTES_PER_S, "L2": l2 / L2_BYTES_PER_S,
             "cube": c.max_core_cube_flops / (CUBE_FLOPS / CUBE_CORES),
             "vector": c.max_block_vector_repeats / VECTOR_REPEATS_PER_S}
    bound = max(times, key=times.get)
    t = times[bound]
    return dict(hbm_bytes=hbm, l2_bytes=l2, workspace_bytes=c.touched_workspace_bytes, fits_l2=fits,
                ub_high_water=c.ub_high_water, cube_gflop=c.cube_flops / 1e9, modelled_us=t * 1e6, bound=bound,
                cube_util=c.cube_flops / (CUBE_FLOPS * t), vector_util=c.vector_repeats / (VECTOR_CORES * VECTOR_REPEATS_PER_S * t))


def bn_row(shape: tuple[int, ...], dtype: torch.dtype) -> Row:
    inputs = testing.bn_inputs(BnCase(shape, dtype, torch.float32))
    _sim.batch_norm_reduce_backward(*inputs.values())
    c = _sim.last_counters()
    elem = torch.finfo(dtype).bits // 8
    channels = shape[1]
    # dy and x once; fp32 mean and invstd; four fp32 sums.
    minimal = 2 * math.prod(shape) * elem + 2 * channels * 4 + 4 * channels * 4
    return Row("batch_norm_reduce_backward", "x".join(map(str, shape)), str(dtype).removeprefix("torch."),
               minimal_bytes=minimal, **_modelled(c))


def flce_row(bt: int, h: int, v: int, mode: str) -> Row:
    case = FlceCase(bt, h, v, torch.bfloat16, mode, "packed", torch.int64, masked_fraction=0.5)
    inputs = testing.flce_inputs(case)
    _sim.fused_linear_cross_entropy_loss_grad(**inputs)
    c = _sim.last_counters()
    e = 2
    # x, w, grad, packed mask, int64 target, (max, sum | softmax) read once; both grads written once.
    minimal = (bt * h + v * h) * e + bt * 4 + math.ceil(bt / 8) + bt * 8
    minimal += bt * 8 if mode == testing.MEMORY_SAVING else bt * v * 4
    minimal += (bt * h + v * h) * e
    blocks = f"{math.ceil(bt / 128)}x{math.ceil(v / 256)} tasks"
    return Row("fused_linear_cross_entropy_loss_grad", f"{bt}x{h}x{v} {mode} ({blocks})", "bfloat16",
               minimal_bytes=minimal, **_modelled(c))


def rows() -> list[Row]:
    out = [
        bn_row((32, 64, 28, 28), torch.float32),
        bn_row((32, 64, 28, 28), torch.bfloat16),
        bn_row((8, 3, 224, 224), torch.float16),   # 3 channels split over 48 cores
        bn_row((16, 2048, 7, 7), torch.float32),   # many channels, short rows
        bn_row((4096, 256), torch.float32),        # S = 1: one element per channel-row
    ]
    for shape in ((256, 512, 4096),   # 2 x 16 tasks
                  (1000, 256, 5000)):  # tails: 1000 = 7 x 128 + 104 rows, 5000 = 19 x 256 + 136 columns
        for mode in (testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE):
            out.append(flce_row(*shape, mode))
    return out


def markdown(table: list[Row]) -> str:
    lines = ["| op | shape | dtype | HBM MB | minimal MB | ratio | L2 MB | ws MB | fits L2 | UB KiB | cube GFLOP "
             "| modelled µs | bound | cube % | vec % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r.op} | {r.shape} | {r.dtype} | {r.hbm_bytes / 1e6:.2f} | {r.minimal_bytes / 1e6:.2f} | "
                     f"{r.traffic_ratio:.2f} | {r.l2_bytes / 1e6:.2f} | {r.workspace_bytes / 1e6:.2f} | "
                     f"{'yes' if r.fits_l2 else 'no'} | {r.ub_high_water / 1024:.1f} | {r.cube_gflop:.2f} | "
                     f"{r.modelled_us:.1f} | {r.bound} | {100 * r.cube_util:.0f} | {100 * r.vector_util:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", help="also write the rows to this CSV file")
    args = parser.parse_args(argv)
    if _sim.load_error:
        print(_sim.load_error, file=sys.stderr)
        return 2
    table = rows()
    print(markdown(table))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(asdict(table[0])) + ["traffic_ratio"])
            writer.writeheader()
            for r in table:
                writer.writerow({**asdict(r), "traffic_ratio": r.traffic_ratio})
    return 0


if __name__ == "__main__":
    sys.exit(main())
