"""Runs a test's ranks as real processes and collects what each saved.

A rank script is called as `script RANK WORLD PORT OUT` and saves its results to
OUT/rank{RANK}.pt; rank 0 hosts the process group's store on 127.0.0.1:PORT.
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys

import torch

import ascend_ops


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_rank_environment(**extra: str) -> dict[str, str]:
    """This environment for gloo ranks on CPU: one thread each (the ranks share the
    machine's cores), this ascend_ops first on the path, plus `extra`."""
    package_root = str(pathlib.Path(ascend_ops.__file__).parents[1])
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    return {**os.environ, **extra, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}


def run_ranks(script: str | pathlib.Path, world: int, out: pathlib.Path, *,
              env: dict[str, str] | None = None, timeout: float = 180,
              script_args: tuple[str, ...] = ()) -> list[dict]:
    """Start `world` ranks of `script` (`script_args` before the rank arguments), wait for
    all (killing any left on failure), require each to succeed (its output in the message),
    and return their saved results by rank."""
    port = free_port()
    procs = [subprocess.Popen([sys.executable, str(script), *script_args, str(rank), str(world),
                               str(port), str(out)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for rank in range(world)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=timeout)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for rank, (p, log) in enumerate(zip(procs, logs)):
        assert p.returncode == 0, f"rank {rank} failed:\n{log}"
    return [torch.load(out / f"rank{rank}.pt") for rank in range(world)]
