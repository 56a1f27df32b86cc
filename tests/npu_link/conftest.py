"""Fixtures of the NPU link check: stub CANN libraries and a probe process that loads
torch_npu's libtorch_npu.so and then ascend_ops' NPU adapter against them.

These tests need torch_npu installed (CI's separate torch_npu venv, see .ci/run) and
skip elsewhere. Where torch_npu is installed, the adapter must have been built too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

from npu_link.npu_link_support import stub_libraries


@pytest.fixture(scope="session")
def torch_npu_dir() -> pathlib.Path:
    return pathlib.Path(importlib.util.find_spec("torch_npu").origin).parent


@pytest.fixture(scope="session")
def adapter_path() -> pathlib.Path:
    """The built ascend_ops._npu library (a build without it is an error here)."""
    spec = importlib.util.find_spec("ascend_ops._npu")
    assert spec is not None, ("torch_npu is installed but ascend_ops._npu was not built: "
                              "build with ASCEND_OPS_NPU=1")
    return pathlib.Path(spec.origin)


@pytest.fixture(scope="session")
def stub_cann(tmp_path_factory) -> pathlib.Path:
    """A directory of stub CANN shared libraries (see stub_cann/symbols.txt)."""
    out = tmp_path_factory.mktemp("stub_cann")
    for library, symbols in stub_libraries().items():
        source = out / f"{library}.c"
        source.write_text("".join(f"int {name}(void) {{ return 0; }}\n" for name in symbols))
        subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{library}", "-o",
                        str(out / library), str(source)], check=True)
    return out


# Loads libtorch_npu.so as importing torch_npu would (globally, every symbol bound now),
# without torch_npu's Python initialisation, which needs a device.
PRELUDE = """
import ctypes, importlib.util, json, os, sys
import torch
_dir = os.path.dirname(importlib.util.find_spec("torch_npu").origin)
ctypes.CDLL(os.path.join(_dir, "lib", "libtorch_npu.so"), mode=ctypes.RTLD_GLOBAL | os.RTLD_NOW)
result = {}
"""


@pytest.fixture(scope="session")
def probe(stub_cann):
    """probe(code, env=...) runs `code` after PRELUDE in a fresh Python against the stub
    CANN libraries (with `env` added to the environment) and returns the `result` dict it
    fills; fails with the process's output."""

    def run(code: str, *, with_stubs: bool = True, env: dict | None = None) -> dict:
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", LD_BIND_NOW="1",
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **(env or {}))
        if with_stubs:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                [str(stub_cann)] + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
        script = (PRELUDE if with_stubs else "import json\nresult = {}\n") + code + \
            "\nprint('RESULT ' + json.dumps(result))\n"
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env=env, timeout=300)
        assert done.returncode == 0, f"probe failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        line = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")][-1]
        return json.loads(line.removeprefix("RESULT "))

    return run
