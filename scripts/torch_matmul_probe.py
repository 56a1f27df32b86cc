"""Whether this CPU multiplies bfloat16 matrices faster in bfloat16 or in fp32 copies.

The benchmarks compare against what torch itself does with bf16 operands. Where oneDNN
has bf16 kernels (AVX512 and AMX CPUs) `torch.matmul` on bf16 is its fastest GEMM; on a
CPU without AVX512 (e.g. AMD EPYC of the Zen 3 class, AVX2 only) torch 2.13 runs it on a
scalar fallback, measured ~170x slower than its fp32 GEMM on the same values: a floor or a
baseline made of bf16 matmuls would then measure that fallback, not the hardware. This
probe times both on one small product (a few ms where bf16 is fast, about a second where
it is not) so the scripts can take the faster form and name it in their rows.
"""

from __future__ import annotations

import dataclasses
import time

import torch


@dataclasses.dataclass(frozen=True)
class MatmulProbe:
    bf16_gflops: float  # torch.matmul on bf16 operands, bf16 out
    fp32_gflops: float  # torch.matmul on fp32 copies of the same values

    @property
    def bf16_is_slower(self) -> bool:
        return self.bf16_gflops < self.fp32_gflops

    def describe(self) -> str:
        return (f"torch.matmul bf16 {self.bf16_gflops:.1f} GFLOP/s, fp32 {self.fp32_gflops:.1f} "
                f"GFLOP/s on a 128 x 512 x 512 product")


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
    return MatmulProbe(bf16_gflops=flop / _best_seconds(lambda: torch.matmul(a, b)) / 1e9,
                       fp32_gflops=flop / _best_seconds(lambda: torch.matmul(a32, b32)) / 1e9)
