"""What the benchmarks that measure in worker processes share: starting a worker (this
same script with --worker) and reading its one result line, the process's resident memory
and its peak, and the plain-text table they print."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

RESULT_MARK = "RESULT "


def report(result) -> None:
    """The worker side: print `result` (JSON-serialisable) on the line run_worker reads."""
    print(RESULT_MARK + json.dumps(result))


def live_memory_env() -> dict:
    """This process's environment with glibc told to map large blocks directly and give them
    back on free, so that a child's resident memory follows its live memory (with glibc's
    defaults freed blocks of up to 32 MiB stay resident, and the peak depends on the order
    of allocations: FLCE at (4096, 4096, 16000) read 400-456 MiB that way, 334 MiB live
    in a warmed-up process)."""
    return {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}


def worker_env() -> dict:
    """live_memory_env, with the bfloat16 GEMM engines this process chose pinned for the
    worker (ASCEND_OPS_CPU_GEMM_FP32_OUT / _ROUNDED), so that every process of a benchmark
    runs the engines its rows name. A worker would otherwise measure its own at first use,
    and under live_memory_env the own engines' packing buffers are fresh mappings faulted in
    on every call: on AMD EPYC (AVX2 only) a worker's first-use measurement picked mkl for
    fp32-out (0.062-0.065 TFLOP/s against avx2's 0.057-0.060; with glibc's defaults avx2
    0.070-0.072 against 0.062-0.064), and MKL's cached buffers then added 47 MiB to the FLCE
    peak of the rows that named avx2."""
    env = live_memory_env()
    try:
        from ascend_ops.cpu_info import GEMM_KINDS, gemm_engine_report

        engines = gemm_engine_report().engines
    except (ImportError, RuntimeError):  # no ascend_ops, or its native library not loaded
        return env
    for kind in GEMM_KINDS:
        env[f"ASCEND_OPS_CPU_GEMM_{kind.upper()}"] = engines[kind]
    return env


def run_worker(script: str, command: list[str], timeout: float):
    """Run `script` with `command` in a fresh Python (worker_env) and return what it
    report()ed."""
    result = subprocess.run([sys.executable, script, *command], env=worker_env(),
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise SystemExit(f"worker {command} failed:\n{result.stdout}\n{result.stderr}")
    line = next(l for l in result.stdout.splitlines() if l.startswith(RESULT_MARK))
    return json.loads(line[len(RESULT_MARK):])


def status_kb(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS: resident now, VmHWM: its peak)."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak_rss() -> None:
    # Writing 5 to clear_refs resets VmHWM (the peak RSS) to the current RSS (Linux >= 4.0).
    pathlib.Path("/proc/self/clear_refs").write_text("5")


def text_table(header: tuple[str, ...], body: list[tuple[str, ...]]) -> str:
    """Left-aligned columns under a dashed rule."""
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
