"""The CPU the kernels run on, and the GEMM engine they chose there.

`cpu_info()` reads the model and the two ISA flags that decide which GEMM engines are fast
(AMX-BF16: oneDNN's tile kernels; AVX512-BF16: the own kernel and oneDNN's AVX512 ones)
from /proc/cpuinfo. `gemm_engine_report()` gives the engine the CPU kernels use for
bfloat16 and each engine's speed as measured once per process (docs/cpu_kernels.md).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import platform

from ._extension import native

__all__ = ["CpuInfo", "cpu_info", "GemmEngineReport", "gemm_engine_report"]


@dataclasses.dataclass(frozen=True)
class CpuInfo:
    model: str
    amx_bf16: bool
    avx512_bf16: bool

    def describe(self) -> str:
        flags = ", ".join(f"{name} {'yes' if on else 'no'}" for name, on in
                          (("amx_bf16", self.amx_bf16), ("avx512_bf16", self.avx512_bf16)))
        return f"{self.model} ({flags})"


def cpu_info() -> CpuInfo:
    """Model name and flags of the first processor in /proc/cpuinfo (Linux); elsewhere the
    platform's processor string and no flags."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return CpuInfo(model, False, False)
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            model = value.strip()
        elif key.strip() == "flags":
            flags = set(value.split())
            break
    return CpuInfo(model, "amx_bf16" in flags, "avx512_bf16" in flags)


@dataclasses.dataclass(frozen=True)
class GemmEngineReport:
    engine: str                 # the engine the CPU kernels use for bfloat16
    forced: bool                # chosen by ASCEND_OPS_CPU_GEMM / ASCEND_OPS_CPU_PORTABLE
    tflops: dict[str, float]    # every available engine on the representative block

    def describe(self) -> str:
        how = "forced by the environment" if self.forced else "fastest measured"
        speeds = ", ".join(f"{name} {t:.3f}" for name, t in self.tflops.items())
        return f"{self.engine} ({how}); measured TFLOP/s: {speeds}"


def gemm_engine_report() -> GemmEngineReport:
    """The CPU kernels' bfloat16 GEMM engine; measures the engines on first call (a few ms).
    Raises RuntimeError when ascend_ops._C is not loaded, ValueError for a bad switch."""
    _C = native()
    forced = os.environ.get("ASCEND_OPS_CPU_GEMM", "auto") not in ("", "auto") or \
        os.environ.get("ASCEND_OPS_CPU_PORTABLE") == "1"
    return GemmEngineReport(_C.cpu_gemm_engine(), forced, dict(_C.cpu_gemm_timings()))
