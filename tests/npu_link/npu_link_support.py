"""Helpers of the NPU link check (tests/npu_link): whether it can run here, the stub CANN
libraries' symbol lists, and the dynamic symbols of a shared library."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess

HERE = pathlib.Path(__file__).resolve().parent
TORCH_NPU_INSTALLED = importlib.util.find_spec("torch_npu") is not None
SKIP_REASON = ("torch_npu is not installed: the NPU link check runs in CI's separate "
               "torch_npu venv (.ci/run)")


def stub_libraries() -> dict[str, list[str]]:
    """{library file name: symbols it defines} from stub_cann/symbols.txt."""
    libraries: dict[str, list[str]] = {}
    current = None
    for line in (HERE / "stub_cann" / "symbols.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if match := re.fullmatch(r"\[(\S+)\]", line):
            current = libraries.setdefault(match.group(1), [])
        else:
            current.append(line)
    return libraries


def dynamic_symbols(path: pathlib.Path, defined: bool) -> set[str]:
    """Demangled names of the dynamic symbols `path` defines (or needs: strong undefined)."""
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-DC", flag, str(path)], capture_output=True, text=True,
                         check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split(None, 2) if defined else line.split(None, 1)
        kind, name = (parts[1], parts[2]) if defined else (parts[0], parts[1])
        if not defined and kind != "U":
            continue  # weak references may stay unresolved
        names.add(name.split("@")[0])
    return names
