"""One call's peak resident memory, measured in a fresh Python process (Linux), with the
benchmarks' own helpers (scripts/worker_processes.py)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import ascend_ops

SCRIPTS = pathlib.Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
from worker_processes import live_memory_env  # noqa: E402

SCRIPT = """
import sys, torch, ascend_ops
from ascend_ops import testing
from worker_processes import reset_peak_rss, status_kb
{setup}
{call}  # warm-up: thread pools, GEMM buffers
before = status_kb('VmRSS')
reset_peak_rss()
{call}
print((status_kb('VmHWM') - before) / 1024)
"""


def peak_extra_mib(setup: str, call: str, drop_env: tuple[str, ...] = ()) -> float:
    """Runs `setup`, then `call` twice, in a fresh Python; returns the second call's peak
    resident memory above what was resident before it, in MiB. The child runs under
    live_memory_env (resident memory follows live memory). `drop_env`: environment
    variables the child must not see."""
    return fresh_python_number(SCRIPT.format(setup=setup, call=call), drop_env)


def fresh_python_number(script: str, drop_env: tuple[str, ...] = (), set_env: dict | None = None) -> float:
    """Runs `script` in a fresh Python under live_memory_env, with this ascend_ops and
    scripts/ importable, and returns the last number it printed."""
    package_root = str(pathlib.Path(ascend_ops.__file__).parents[1])
    env = {**live_memory_env(),
           "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    for name in drop_env:
        env.pop(name, None)
    env.update(set_env or {})
    script = f"import sys; sys.path.insert(0, {str(SCRIPTS)!r})\n" + script
    # ASCEND_OPS_TEST_TIMEOUT_SCALE stretches the limit where the child is emulated (a run of
    # the suite on the aarch64 tool, under qemu)
    timeout = 300 * float(os.environ.get("ASCEND_OPS_TEST_TIMEOUT_SCALE", "1"))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=timeout, env=env)
    assert result.returncode == 0, result.stderr
    return float(result.stdout.split()[-1])
