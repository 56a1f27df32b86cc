"""The CPU the kernels run on, and the GEMM engine they chose there.

`cpu_info()` reads the model and the two ISA flags that decide which GEMM engines are fast
(AMX-BF16: oneDNN's tile kernels; AVX512-BF16: the own kernel and oneDNN's AVX512 ones)
from /proc/cpuinfo. `gemm_engine_report()` gives the engines the CPU kernels use for
bfloat16, one per kind of product (fp32-out and rounded), and each engine's speed on each
kind as measured once per process (docs/cpu_kernels.md).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import platform

from ._extension import native

__all__ = ["CpuInfo", "cpu_info", "GEMM_KINDS", "GemmEngineReport", "gemm_engine_report",
           "gemm_engine_cache", "describe_gemm_engine_cache"]


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


GEMM_KINDS = ("fp32_out", "rounded")  # C fp32; half out for a K complete in one product
_KIND_VARIABLES = {"fp32_out": "ASCEND_OPS_CPU_GEMM_FP32_OUT", "rounded": "ASCEND_OPS_CPU_GEMM_ROUNDED"}


@dataclasses.dataclass(frozen=True)
class GemmEngineReport:
    engines: dict[str, str]             # kind -> the engine the CPU kernels use for bfloat16
    forced: dict[str, bool]             # kind -> chosen by the environment, not measured
    tflops: dict[str, dict[str, float]]  # kind -> every available engine's TFLOP/s on it
    from_cache: dict[str, bool] = dataclasses.field(default_factory=dict)  # kind -> read from the cache file

    @property
    def engine(self) -> str:
        """Both choices in one field, as benchmark rows record them: "fp32_out=E1 rounded=E2"."""
        return " ".join(f"{kind}={self.engines[kind]}" for kind in GEMM_KINDS)

    def describe(self) -> str:
        lines = []
        for kind in GEMM_KINDS:
            how = ("forced by the environment" if self.forced[kind] else
                   "from the engine cache file" if self.from_cache.get(kind) else "fastest measured")
            speeds = ", ".join(f"{name} {t:.3f}" for name, t in self.tflops[kind].items())
            lines.append(f"{kind}: {self.engines[kind]} ({how}); measured TFLOP/s: {speeds}")
        return "\n  ".join(lines)


def _forced(kind: str) -> bool:
    own = os.environ.get(_KIND_VARIABLES[kind], "")
    if own:
        return own != "auto"
    return os.environ.get("ASCEND_OPS_CPU_GEMM", "auto") not in ("", "auto") or \
        os.environ.get("ASCEND_OPS_CPU_PORTABLE") == "1"


def gemm_engine_report() -> GemmEngineReport:
    """The CPU kernels' bfloat16 GEMM engine per kind of product; measures the engines on
    first call (some ms). Raises RuntimeError when ascend_ops._C is not loaded, ValueError
    for a bad switch."""
    _C = native()
    engines = {kind: _C.cpu_gemm_engine(kind) for kind in GEMM_KINDS}
    return GemmEngineReport(engines, {kind: _forced(kind) for kind in GEMM_KINDS},
                            {kind: dict(_C.cpu_gemm_timings(kind)) for kind in GEMM_KINDS},
                            {kind: _C.cpu_gemm_from_cache(kind) for kind in GEMM_KINDS})


def gemm_engine_cache() -> tuple[str, list[str]]:
    """The file that keeps the bfloat16 GEMM engine choices per CPU (docs/cpu_kernels.md:
    $ASCEND_OPS_CPU_GEMM_CACHE, else $XDG_CACHE_HOME or ~/.cache, /ascend_ops/
    cpu_gemm_engines.tsv; "" when turned off) and its lines other than comments (none when
    it does not exist yet). Raises RuntimeError when ascend_ops._C is not loaded."""
    path = native().cpu_gemm_cache_path()
    if not path:
        return "", []
    try:
        text = pathlib.Path(path).read_text()
    except OSError:
        return path, []
    return path, [line for line in text.splitlines() if line and not line.startswith("#")]


def describe_gemm_engine_cache() -> str:
    """One paragraph for `python -m ascend_ops`: where the engine cache is and what it holds."""
    try:
        path, lines = gemm_engine_cache()
    except RuntimeError as error:
        return f"CPU GEMM engine cache: unavailable: {error}"
    if not path:
        return "CPU GEMM engine cache: off (ASCEND_OPS_CPU_GEMM_CACHE); every process measures"
    if not lines:
        return f"CPU GEMM engine cache: {path} (empty: the next bfloat16 GEMM measures and writes it)"
    held = "\n  ".join(line.replace("\t", "  ") for line in lines)
    return f"CPU GEMM engine cache: {path} (delete it to measure again):\n  {held}"
