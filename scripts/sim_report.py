#!/usr/bin/env python
"""Modelled Atlas A2 (910B) cost of the Ascend C kernels, from the simulator's counters.

For each op and shape: the GM bytes the kernels (and, for FLCE, the host-composed GEMMs)
read and wrote, next to the operator's minimal GM traffic (every input read once, every
output written once), the UB high-water mark, and a roofline time:

    time = max(GM bytes / HBM bandwidth, cube FLOPs / cube peak, busiest core's vector repeats / clock)

Assumptions (not measurements; ascendc_kernels/common/platform.h): HBM 1.6 TB/s, cube
313 TFLOP/s fp16/bf16, one 256-byte vector repeat per cycle at 1.85 GHz per vector core,
48 vector cores. Launch overheads, DMA efficiency and pipeline stalls are not modelled:
read it as a lower bound.

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

from ascend_ops import _sim, testing
from ascend_ops.testing import BnCase, FlceCase

# The modelling facts come from the one platform description (ascendc_kernels/common/
# platform.h, read through the simulator library), the one the tilings and the simulator use.
_A2 = _sim.platform_910b() if _sim.load_error is None else None
HBM_BYTES_PER_S = _A2.hbmBytesPerS if _A2 else float("nan")
CUBE_FLOPS = _A2.cubeFlopsPerS if _A2 else float("nan")
VECTOR_REPEATS_PER_S = _A2.vectorClockHz if _A2 else float("nan")


@dataclass
class Row:
    op: str
    shape: str
    dtype: str
    launches: int
    gm_bytes: int
    minimal_bytes: int
    ub_high_water: int
    cube_gflop: float
    modelled_us: float
    bound: str

    @property
    def traffic_ratio(self) -> float:
        return self.gm_bytes / self.minimal_bytes


def _modelled(c: _sim.Counters) -> tuple[float, str]:
    times = {"HBM": (c.gm_read_bytes + c.gm_write_bytes) / HBM_BYTES_PER_S,
             "cube": c.cube_flops / CUBE_FLOPS,
             "vector": c.max_block_vector_repeats / VECTOR_REPEATS_PER_S}
    bound = max(times, key=times.get)
    return times[bound] * 1e6, bound


def bn_row(shape: tuple[int, ...], dtype: torch.dtype) -> Row:
    inputs = testing.bn_inputs(BnCase(shape, dtype, torch.float32))
    _sim.batch_norm_reduce_backward(*inputs.values())
    c = _sim.last_counters()
    elem = torch.finfo(dtype).bits // 8
    channels = shape[1]
    # dy and x once; fp32 mean and invstd; four fp32 sums.
    minimal = 2 * math.prod(shape) * elem + 2 * channels * 4 + 4 * channels * 4
    us, bound = _modelled(c)
    return Row("batch_norm_reduce_backward", "x".join(map(str, shape)), str(dtype).removeprefix("torch."),
               c.launches, c.gm_read_bytes + c.gm_write_bytes, minimal, c.ub_high_water, 0.0, us, bound)


def flce_row(bt: int, h: int, v: int, mode: str, budget: int = 0) -> Row:
    case = FlceCase(bt, h, v, torch.bfloat16, mode, "packed", torch.int64, masked_fraction=0.5)
    inputs = testing.flce_inputs(case)
    _sim.fused_linear_cross_entropy_loss_grad(**inputs, workspace_budget=budget)
    c = _sim.last_counters()
    e = 2
    # x, w, grad, packed mask, int64 target, (max, sum | softmax) read once; both grads written once.
    minimal = (bt * h + v * h) * e + bt * 4 + math.ceil(bt / 8) + bt * 8
    minimal += bt * 8 if mode == testing.MEMORY_SAVING else bt * v * 4
    minimal += (bt * h + v * h) * e
    us, bound = _modelled(c)
    label = f"{bt}x{h}x{v} {mode}" + (f" ({c.launches} chunks)" if c.launches > 1 else "")
    return Row("fused_linear_cross_entropy_loss_grad", label, "bfloat16", c.launches,
               c.gm_read_bytes + c.gm_write_bytes, minimal, c.ub_high_water, c.cube_flops / 1e9, us, bound)


def rows() -> list[Row]:
    out = [
        bn_row((32, 64, 28, 28), torch.float32),
        bn_row((32, 64, 28, 28), torch.bfloat16),
        bn_row((8, 3, 224, 224), torch.float16),   # 3 channels split over 48 cores
        bn_row((16, 2048, 7, 7), torch.float32),   # many channels, short rows
        bn_row((4096, 256), torch.float32),        # S = 1: one element per channel-row
    ]
    for mode in (testing.MEMORY_SAVING, testing.HIGH_PERFORMANCE):
        out.append(flce_row(256, 512, 4096, mode))
    out.append(flce_row(256, 512, 4096, testing.MEMORY_SAVING, budget=4096 * 6 * 64))  # 4 chunks
    return out


def markdown(table: list[Row]) -> str:
    lines = ["| op | shape | dtype | GM MB | minimal MB | ratio | UB high-water KiB | cube GFLOP | modelled µs | bound |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r.op} | {r.shape} | {r.dtype} | {r.gm_bytes / 1e6:.2f} | {r.minimal_bytes / 1e6:.2f} | "
                     f"{r.traffic_ratio:.2f} | {r.ub_high_water / 1024:.1f} | {r.cube_gflop:.2f} | "
                     f"{r.modelled_us:.1f} | {r.bound} |")
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
