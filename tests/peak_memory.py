"""One call's peak resident memory, measured in a fresh Python process (Linux)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import ascend_ops

SCRIPT = """
import pathlib, sys, torch, ascend_ops
from ascend_ops import testing
def kb(field):
    line = next(l for l in pathlib.Path('/proc/self/status').read_text().splitlines() if l.startswith(field))
    return int(line.split()[1])
{setup}
{call}  # warm-up: thread pools, GEMM buffers
before = kb('VmRSS')
pathlib.Path('/proc/self/clear_refs').write_text('5')  # reset the peak to the current RSS
{call}
print((kb('VmHWM') - before) / 1024)
"""


def peak_extra_mib(setup: str, call: str, drop_env: tuple[str, ...] = ()) -> float:
    """Runs `setup`, then `call` twice, in a fresh Python; returns the second call's peak
    resident memory above what was resident before it, in MiB. glibc maps large blocks
    directly and returns them on free there, so resident memory follows live memory.
    `drop_env`: environment variables the child must not see."""
    package_root = str(pathlib.Path(ascend_ops.__file__).parents[1])
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    for name in drop_env:
        env.pop(name, None)
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(setup=setup, call=call)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    return float(result.stdout.split()[-1])
