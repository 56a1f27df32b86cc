"""The CPU the kernels run on, and the GEMM engine they chose there.

`cpu_info()` names the CPU from /proc/cpuinfo and reads the ISA flags that decide which
CPU paths are fast. On x86 those are AMX-BF16 (oneDNN's tile kernels) and AVX512-BF16 (the
own kernel and oneDNN's AVX512 ones), read from its `model name` and `flags`. An aarch64
/proc/cpuinfo has neither: it gives `Features` and the MIDR fields `CPU implementer` and
`CPU part`, which name the core (0x48/0xd01: an Atlas host's HiSilicon Kunpeng 920); the
flags reported there are NEON (asimd), fp16 arithmetic (asimdhp), SVE and BF16 (the
extension oneDNN's bf16 matmul needs on Arm). `gemm_engine_report()` gives the engines the
CPU kernels use for bfloat16, one per kind of product (fp32-out and rounded), and each
engine's speed on each kind as measured once per process (docs/cpu_kernels.md).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import platform

from ._extension import native

__all__ = ["CpuInfo", "cpu_info", "parse_cpuinfo", "GEMM_KINDS", "GemmEngineReport",
           "gemm_engine_report", "gemm_engine_cache", "describe_gemm_engine_cache"]

# aarch64 cores by MIDR_EL1 (implementer, part), as Linux's arch/arm64/include/asm/cputype.h
# numbers them. An Atlas A2/A3 host is a Kunpeng 920; AWS Graviton 2/3/4 are Neoverse N1/V1/V2.
_ARM_IMPLEMENTERS = {0x41: "Arm", 0x42: "Broadcom", 0x43: "Cavium", 0x46: "Fujitsu",
                     0x48: "HiSilicon", 0x4E: "NVIDIA", 0x50: "APM", 0x51: "Qualcomm",
                     0x61: "Apple", 0x70: "Phytium", 0xC0: "Ampere"}
_ARM_PARTS = {
    (0x48, 0xD01): "HiSilicon Kunpeng 920 (TaiShan v110)",
    (0x48, 0xD02): "HiSilicon TaiShan v120",
    (0x41, 0xD03): "Arm Cortex-A53",
    (0x41, 0xD05): "Arm Cortex-A55",
    (0x41, 0xD07): "Arm Cortex-A57",
    (0x41, 0xD08): "Arm Cortex-A72",
    (0x41, 0xD0B): "Arm Cortex-A76",
    (0x41, 0xD0C): "Arm Neoverse N1",
    (0x41, 0xD40): "Arm Neoverse V1",
    (0x41, 0xD49): "Arm Neoverse N2",
    (0x41, 0xD4F): "Arm Neoverse V2",
    (0x41, 0xD84): "Arm Neoverse V3",
    (0x41, 0xD8E): "Arm Neoverse N3",
    (0x46, 0x001): "Fujitsu A64FX",
    (0xC0, 0xAC3): "Ampere AmpereOne",
}
# The aarch64 Features that decide a CPU path: NEON, fp16 arithmetic, SVE, BF16.
_ARM_FLAGS = ("asimd", "asimdhp", "sve", "bf16")
_X86_FLAGS = ("amx_bf16", "avx512_bf16")


@dataclasses.dataclass(frozen=True)
class CpuInfo:
    model: str
    amx_bf16: bool
    avx512_bf16: bool
    arch: str = "x86_64"
    # The flags that matter on `arch`, in order: x86 amx_bf16, avx512_bf16; aarch64 asimd,
    # asimdhp, sve, bf16.
    flags: tuple[tuple[str, bool], ...] = ()

    def describe(self) -> str:
        flags = self.flags or (("amx_bf16", self.amx_bf16), ("avx512_bf16", self.avx512_bf16))
        listed = ", ".join(f"{name} {'yes' if on else 'no'}" for name, on in flags)
        return f"{self.model} ({listed})" if self.arch == "x86_64" else \
            f"{self.model} ({self.arch}: {listed})"


def _arm_model(implementer: int | None, part: int | None) -> str:
    if implementer is None or part is None:
        return "unknown aarch64 CPU"
    if (implementer, part) in _ARM_PARTS:
        return _ARM_PARTS[implementer, part]
    vendor = _ARM_IMPLEMENTERS.get(implementer, f"implementer {implementer:#04x}")
    return f"{vendor} aarch64 CPU (part {part:#05x})"


def parse_cpuinfo(text: str, fallback_model: str = "") -> CpuInfo:
    """The first processor of a /proc/cpuinfo text: x86 (`model name`, `flags`) or aarch64
    (`CPU implementer`, `CPU part`, `Features`), told apart by which fields it has."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep:
            continue
        if key == "processor" and fields.get("processor") not in (None, value.strip()):
            break  # the second processor: the first one's fields are all read
        fields.setdefault(key, value.strip())
    if "CPU implementer" in fields or "Features" in fields:
        def hex_field(name: str) -> int | None:
            try:
                return int(fields[name], 16)
            except (KeyError, ValueError):
                return None
        features = set(fields.get("Features", "").split())
        return CpuInfo(_arm_model(hex_field("CPU implementer"), hex_field("CPU part")), False, False,
                       arch="aarch64", flags=tuple((f, f in features) for f in _ARM_FLAGS))
    flags = set(fields.get("flags", "").split())
    model = fields.get("model name") or fallback_model or "unknown CPU"
    return CpuInfo(model, "amx_bf16" in flags, "avx512_bf16" in flags, arch="x86_64",
                   flags=tuple((f, f in flags) for f in _X86_FLAGS))


def cpu_info() -> CpuInfo:
    """Model and flags of the first processor in /proc/cpuinfo (Linux, x86 or aarch64);
    elsewhere the platform's processor string and no flags."""
    fallback = platform.processor() or platform.machine()
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return CpuInfo(fallback, False, False, arch=platform.machine() or "unknown")
    return parse_cpuinfo(text, fallback)


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
            # 3 significant digits: an emulated CPU (CI's aarch64 run) measures < 0.0005
            speeds = ", ".join(f"{name} {t:.3g}" for name, t in self.tflops[kind].items())
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
