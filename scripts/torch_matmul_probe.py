"""Whether torch multiplies bfloat16 matrices on CPU with fast kernels, and how fast.

The benchmarks compare against what torch itself does with bf16 operands. Where oneDNN
has bf16 kernels (CPUs with AVX512 or AMX; torch's own check,
`torch.ops.mkldnn._is_mkldnn_bf16_supported()`, is what routes `torch.matmul` to them) bf16
is its fastest GEMM; elsewhere (e.g. AMD EPYC of the Zen 3 class, AVX2 only) torch 2.13
runs bf16 matmul on a scalar fallback, measured ~170x slower than its fp32 GEMM on the same
values: a floor or a baseline made of bf16 matmuls would then measure that fallback, not
the hardware, and the scripts take the fp32 forms instead. The decision follows torch's
check, not a timing, so load on the machine cannot flip it; the probe's timings (one small
product each, about a second where bf16 is the fallback) are printed for the record.
"""

from __future__ import annotations

import dataclasses
import time

import torch


@dataclasses.dataclass(frozen=True)
class MatmulProbe:
    onednn_bf16: bool   # torch routes bf16 matmul to oneDNN's bf16 kernels on this CPU
    bf16_gflops: float  # torch.matmul on bf16 operands, bf16 out
    fp32_gflops: float  # torch.matmul on fp32 copies of the same values

    @property
    def bf16_is_slow(self) -> bool:
        return not self.onednn_bf16

    def describe(self) -> str:
        return (f"oneDNN bf16 kernels {'yes' if self.onednn_bf16 else 'no'}; torch.matmul bf16 "
                f"{self.bf16_gflops:.1f} GFLOP/s, fp32 {self.fp32_gflops:.1f} GFLOP/s on a "
                f"128 x 512 x 512 product")


def _best_seconds(run, repeats: int = 3) -> float:
    run()  # warm-up: oneDNN creates its kernel on the first call
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)


def probe_matmul(m: int = 128, k: int = 512, n: int = 512) -> MatmulProbe:
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).bfloat16()
    b = torch.randn(k, n, generator=gen).bfloat16()
    a32, b32 = a.float(), b.float()
    flop = 2.0 * m * k * n
    return MatmulProbe(onednn_bf16=bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
                       bf16_gflops=flop / _best_seconds(lambda: torch.matmul(a, b)) / 1e9,
                       fp32_gflops=flop / _best_seconds(lambda: torch.matmul(a32, b32)) / 1e9)
