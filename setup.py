"""Build and install ascend_ops.

`ascend_ops._C` always holds the operator schemas (generated from
op_plugin/config/ascend_ops.yaml), the shared validation and the CPU kernels: their portable
build for any CPU, and for an x86-64 target also the AVX2/AVX512 kernels (X86_ONLY_SOURCES),
chosen by the target the compiler emits for (target_arch); an aarch64 build (an Atlas
host) holds the portable code only.
`ascend_ops._ascendc_sim` is the Ascend C kernels (ascendc_kernels/) built against the
project's CPU simulator: plain C++, no torch headers, loaded with ctypes (impl="sim").
`ascend_ops._cann_tiling_funcs` is both ops' TilingFuncs (their op_host/*_def.cpp, as
shipped) compiled against CANN's own host Matmul tiling library (asc-devkit, built by
../shared/tools/cann-matmul-tiling, or ASCEND_OPS_CANN_MATMUL_TILING) with our TilingContext
stand-in (ascendc_kernels/cann_host); plain C++, loaded with ctypes. impl="sim" runs the FLCE
kernel with the tiling data it returns; without the tool it is not built (a warning) and
impl="sim" cannot run FLCE.
`ascend_ops._npu`, the NPU adapter (op_plugin/csrc/npu), is built against torch_npu's
headers and libtorch_npu.so when torch_npu is installed; ASCEND_OPS_NPU chooses:
  auto (default): build it when torch_npu is installed in a version the adapter is
    written for (the yaml's op_api ranges), skip it otherwise (with a warning when
    torch_npu is there but unsupported);
  1: build it, fail if that is not possible;  0: never build it.
Build after torch (and torch_npu) are installed, without build isolation:

    pip install --no-build-isolation .
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import pathlib
import shlex
import subprocess
import sys
import time
import warnings

# Importing torch with torch_npu installed but without CANN's libraries fails unless the
# device-backend autoload is off; building needs only torch_npu's headers and libraries.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import setuptools  # noqa: E402
from setuptools import Extension, find_packages, setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension, get_cxx_compiler  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "op_plugin"))
import gen_registration  # noqa: E402  (lives beside the yaml it reads)

GENERATED = ROOT / "build" / "generated" / "register_schemas.cpp"
GENERATED_NPU = ROOT / "build" / "generated" / "npu"


# Python's own flags ask for -g; debug information for torch's inline templates took ~20 %
# of a kernel file's compile time (batch_norm_stats.cpp: 5.2-5.5 s with -g0, 6.6-6.8 s
# without, x86-64 gcc 12). ASCEND_OPS_DEBUG=1 builds with -O0 -g.
NO_DEBUG_INFO = [] if os.environ.get("ASCEND_OPS_DEBUG") == "1" else ["-g0"]


def progress(message: str) -> None:
    """A line on the terminal while pip builds: pip shows the build's own output only with
    -v, and a quiet build of several minutes looks hung. Falls back to stderr (which pip
    shows with -v or on failure) where there is no terminal, as in CI."""
    try:
        with open("/dev/tty", "w") as tty:
            tty.write(f"ascend_ops: {message}\n")
    except OSError:
        print(f"ascend_ops: {message}", file=sys.stderr, flush=True)


class BuildWithProgress(BuildExtension):
    """torch's BuildExtension (ninja, in parallel), saying which library it compiles and
    how long each took."""

    def build_extensions(self) -> None:
        files = sum(len(ext.sources) for ext in self.extensions)
        progress(f"compiling {files} C++ files into {len(self.extensions)} libraries for "
                 f"{TARGET_ARCH} (155 s on 2 cores in the README's measurement, longer under load; "
                 "`pip install -v` shows each compile)")
        super().build_extensions()

    def build_extension(self, ext: Extension) -> None:
        start = time.monotonic()
        progress(f"{ext.name}: {len(ext.sources)} files ...")
        super().build_extension(ext)
        progress(f"{ext.name}: done in {time.monotonic() - start:.0f} s")


def relative(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT))


# The sources compiled only for an x86-64 target: the AVX2 and AVX512 kernels (`#pragma GCC
# target`, <immintrin.h>, x86 SLEEF symbols, _mm_prefetch) and the drivers of the own GEMMs,
# which call nothing but them. The portable files name them only under
# `#if ASCEND_OPS_X86_KERNELS` (op_plugin/csrc/cpu/isa_builds.h); tests/test_build_sources.py
# checks that every file using x86 intrinsics is listed here.
X86_ONLY_SOURCES = frozenset({
    "op_plugin/csrc/cpu/gemm/engines/avx512bf16/avx512_kernels.cpp",
    "op_plugin/csrc/cpu/gemm/engines/avx512bf16/bf16_gemm.cpp",
    "op_plugin/csrc/cpu/gemm/engines/avx2/avx2_kernels.cpp",
    "op_plugin/csrc/cpu/gemm/engines/avx2/avx2_gemm_kernels.cpp",
    "op_plugin/csrc/cpu/gemm/engines/avx2/avx2_gemm.cpp",
    "op_plugin/csrc/cpu/gemm/engines/amx/amx_kernels.cpp",
    "op_plugin/csrc/cpu/gemm/engines/amx/amx_tiles.h",  # included by the two AMX files only
    "op_plugin/csrc/cpu/gemm/peak_loops/avx512_peak_loops.cpp",
    "op_plugin/csrc/cpu/gemm/peak_loops/avx2_peak_loops.cpp",
    "op_plugin/csrc/cpu/gemm/peak_loops/amx_peak_loops.cpp",
    "op_plugin/csrc/cpu/batch_norm/batch_norm_loops_avx512.cpp",
    "op_plugin/csrc/cpu/batch_norm/batch_norm_loops_avx2.cpp",
})


def target_arch() -> str:
    """The CPU architecture the C++ compiler emits code for: "x86_64", "aarch64", ...

    Asked of the compiler that torch's BuildExtension runs (get_cxx_compiler(): $CXX, else
    c++) with -dumpmachine, because that is what the objects are built for: the build
    host's platform.machine() differs from it whenever a cross compiler is used (the
    aarch64 CI tool runs pip under qemu, where uname says aarch64, but a cross-building
    setup on an x86 host would see x86_64).
    """
    command = shlex.split(get_cxx_compiler()) + ["-dumpmachine"]
    try:
        triple = subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"cannot ask the C++ compiler its target ({shlex.join(command)}): {error}")
    arch = triple.split("-")[0]
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


TARGET_ARCH = target_arch()
X86_KERNELS = TARGET_ARCH == "x86_64"


def native_sources() -> list[str]:
    csrc = ROOT / "op_plugin" / "csrc"
    # The CPU kernels live in one folder per concern (cpu/gemm, cpu/cross_entropy, cpu/batch_norm),
    # the GEMM layer's in sub-folders of its own (engines, choice, operands, peak_loops).
    sources = sorted(csrc.glob("*.cpp")) + sorted((csrc / "cpu").glob("*/**/*.cpp"))
    # CANN's shape limits, plain C++: _C reports them on every build (ascend_ops.npu_limits).
    sources.append(csrc / "npu" / "builtin_limits.cpp")
    chosen = [relative(p) for p in sources if X86_KERNELS or relative(p) not in X86_ONLY_SOURCES]
    return [relative(gen_registration.generate(GENERATED))] + chosen


def simulator_extension() -> Extension:
    """The Ascend C kernels, their host tiling and the simulator, as one plain C++ library."""
    kernels = ROOT / "ascendc_kernels"
    sources = (sorted((kernels / "sim" / "src").glob("*.cpp"))
               + sorted((kernels / "sim" / "host").glob("*.cpp"))
               + sorted((kernels / "sim" / "selftest").glob("*.cpp"))
               + sorted(kernels.glob("*/op_kernel/*.cpp")))
    return Extension(
        "ascend_ops._ascendc_sim",
        [relative(p) for p in sources],
        include_dirs=[str(kernels / "sim" / "include")],  # absolute: ninja runs in build/
        extra_compile_args=["-std=c++17", "-O2", "-pthread", *NO_DEBUG_INFO],
        extra_link_args=["-pthread"],
        language="c++",
    )


def cann_tiling_extension() -> Extension | None:
    """Both ops' TilingFuncs against CANN's host tiling library, or None without the tool."""
    default = ROOT.parent / "shared" / "tools" / "cann-matmul-tiling"
    tool = pathlib.Path(os.environ.get("ASCEND_OPS_CANN_MATMUL_TILING", default))
    if not (tool / "build.sh").is_file():
        if os.environ.get("ASCEND_OPS_REQUIRE_CANN_TILING") == "1":  # .ci/run: CI has ../shared
            sys.exit(f"ASCEND_OPS_REQUIRE_CANN_TILING=1 but there is no CANN Matmul tiling tool at {tool}")
        warnings.warn(f"no CANN Matmul tiling tool at {tool} (../shared beside the clone, or "
                      "ASCEND_OPS_CANN_MATMUL_TILING): ascend_ops._cann_tiling_funcs is not built and "
                      "impl='sim' cannot run fused_linear_cross_entropy_loss_grad", stacklevel=1)
        return None
    # The library compiles asc-devkit where it lies; its output stays in build/ (licence).
    out = ROOT / "build" / "cann-matmul-tiling"
    subprocess.run([str(tool / "build.sh"), str(out)], check=True)
    cflags = (out / "cflags").read_text().split()
    ldflags = (out / "ldflags").read_text().split()
    kernels = ROOT / "ascendc_kernels"
    ops = ("fused_linear_cross_entropy_loss_grad", "batch_norm_reduce_backward")
    return Extension(
        "ascend_ops._cann_tiling_funcs",
        [relative(kernels / "cann_host" / "tiling_func_host.cpp")]
        + [relative(kernels / op / "op_host" / f"{op}_def.cpp") for op in ops],
        include_dirs=[str(kernels / "cann_host" / "include")] + [f[2:] for f in cflags if f.startswith("-I")],
        extra_compile_args=[f for f in cflags if not f.startswith("-I")] + ["-O2", *NO_DEBUG_INFO],
        extra_objects=[f for f in ldflags if f.endswith(".a")],
        extra_link_args=[f for f in ldflags if not f.endswith(".a")],
        language="c++",
    )


extra_compile_args = ["-O3", "-fopenmp", *NO_DEBUG_INFO]
if os.environ.get("ASCEND_OPS_DEBUG") == "1":
    extra_compile_args = ["-O0", "-g", "-fopenmp"]


def npu_extension() -> setuptools.Extension | None:
    """The NPU adapter extension, or None when ASCEND_OPS_NPU and the environment say no.

    The include and library directories are those torch_npu's NpuExtension uses (plus
    op-plugin's headers), set here because NpuExtension imports torch_npu, and importing
    torch_npu needs CANN's libraries, which compiling and linking do not.
    """
    mode = os.environ.get("ASCEND_OPS_NPU", "auto")
    spec = importlib.util.find_spec("torch_npu") if mode != "0" else None
    installed = importlib.metadata.version("torch-npu") if spec is not None else None
    plan, why = gen_registration.npu_adapter_plan(mode, installed)
    if plan == "fail":
        sys.exit(why)
    if plan == "skip":
        if why:
            warnings.warn(why, stacklevel=1)
        return None
    torch_npu_dir = pathlib.Path(spec.origin).parent
    version = gen_registration.parse_version(installed)
    registration, _ = gen_registration.generate_npu(GENERATED_NPU, version)
    csrc = ROOT / "op_plugin" / "csrc"
    sources = ([registration] + sorted((csrc / "npu").glob("*.cpp"))
               + [csrc / "validation.cpp", csrc / "target_mask.cpp"])
    include = torch_npu_dir / "include"
    return CppExtension(
        "ascend_ops._npu",
        [relative(p) for p in sources],
        include_dirs=[str(GENERATED_NPU), str(include), str(include / "third_party" / "hccl" / "inc"),
                      str(include / "third_party" / "op-plugin")],
        library_dirs=[str(torch_npu_dir / "lib")],
        libraries=["torch_npu"],
        define_macros=[("CURRENT_VERSION", gen_registration.version_macro(version)),
                       ("ASCEND_OPS_TORCH_NPU_VERSION", f"{version[0]}.{version[1]}")],
        extra_compile_args=[a for a in extra_compile_args if a != "-fopenmp"],
    )


extensions = [
    CppExtension(
        "ascend_ops._C",
        native_sources(),
        define_macros=[("ASCEND_OPS_X86_KERNELS", "1" if X86_KERNELS else "0")],
        extra_compile_args=extra_compile_args,
        extra_link_args=["-fopenmp"],
    ),
    simulator_extension(),
]
# ASCEND_OPS_SANITIZE=1: _C and the simulator built with AddressSanitizer and UBSan
# (scripts/sanitize_kernel_tests.sh runs the kernel tests on such a build).
if os.environ.get("ASCEND_OPS_SANITIZE") == "1":
    sanitize = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
    for extension in extensions:
        extension.extra_compile_args = [a for a in extension.extra_compile_args if a != "-O3"] + ["-O1", "-g"] + sanitize
        extension.extra_link_args = extension.extra_link_args + sanitize
if (cann_tiling := cann_tiling_extension()) is not None:
    extensions.append(cann_tiling)
if (npu := npu_extension()) is not None:
    extensions.append(npu)

setup(
    name="ascend_ops",
    version="0.1.0",
    description="Fused linear cross entropy backward and batch-norm reduce backward "
    "for Ascend NPUs (torch_npu) and CPUs",
    package_dir={"": "python"},
    packages=find_packages("python"),
    # the checker's verdicts that integrations.transformers.apply reads
    package_data={"ascend_ops.training.integrations": ["hf_verdicts.json"]},
    python_requires=">=3.10",
    install_requires=["torch>=2.13,<2.14", "numpy"],
    ext_modules=extensions,
    cmdclass={"build_ext": BuildWithProgress},
    zip_safe=False,
)
