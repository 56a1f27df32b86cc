"""Build and install ascend_ops.

`ascend_ops._C` always holds the operator schemas (generated from
op_plugin/config/ascend_ops.yaml), the shared validation and the CPU kernels.
`ascend_ops._ascendc_sim` is the Ascend C kernels (ascendc_kernels/) built against the
project's CPU simulator: plain C++, no torch headers, loaded with ctypes (impl="sim").
Build it after torch is installed, without build isolation:

    pip install --no-build-isolation .
"""

import os
import pathlib
import sys

from setuptools import Extension, find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "op_plugin"))
import gen_registration  # noqa: E402  (lives beside the yaml it reads)

GENERATED = ROOT / "build" / "generated" / "register_schemas.cpp"


def relative(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT))


def native_sources() -> list[str]:
    csrc = ROOT / "op_plugin" / "csrc"
    sources = sorted(csrc.glob("*.cpp")) + sorted((csrc / "cpu").glob("*.cpp"))
    return [relative(gen_registration.generate(GENERATED))] + [relative(p) for p in sources]


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
        extra_compile_args=["-std=c++17", "-O2", "-pthread"],
        extra_link_args=["-pthread"],
        language="c++",
    )


extra_compile_args = ["-O3", "-fopenmp"]
if os.environ.get("ASCEND_OPS_DEBUG") == "1":
    extra_compile_args = ["-O0", "-g", "-fopenmp"]

setup(
    name="ascend_ops",
    version="0.1.0",
    description="Fused linear cross entropy backward and batch-norm reduce backward "
    "for Ascend NPUs (torch_npu) and CPUs",
    package_dir={"": "python"},
    packages=find_packages("python"),
    python_requires=">=3.10",
    install_requires=["torch>=2.13,<2.14", "numpy"],
    ext_modules=[
        CppExtension(
            "ascend_ops._C",
            native_sources(),
            extra_compile_args=extra_compile_args,
            extra_link_args=["-fopenmp"],
        ),
        simulator_extension(),
    ],
    cmdclass={"build_ext": BuildExtension},
    zip_safe=False,
)
