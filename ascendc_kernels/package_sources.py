#!/usr/bin/env python3
"""What build.sh copies into the msopgen project, derived from the sources' own includes.

    package_sources.py PROJECT OP...   ->  one "SOURCE<TAB>DESTINATION" line per file

Each op contributes two roots under msopgen's names (the op type AscendOps<Op> in snake
case): `<op>/op_kernel/<op>.cpp` to `op_kernel/<project's name for the op>.cpp` in the
project, and `<op>/op_host/<op>_def.cpp` to `op_host/<project's name for the op>.cpp`.
Every quoted #include of a root, and of every file it reaches, that names a file of this
tree (resolved from the including file's folder, as the compiler does first) is copied too.
Paths are relative to ascendc_kernels/ and to the directory the project lies in: a file X
of an op's folder goes to the project's X, and any other folder (common/) keeps its place
beside the project, so a relative include (`../../common/platform.h` from op_host/) finds the same file in the project as in
the tree. Includes this tree does not hold (kernel_operator.h, lib/matmul_intf.h,
kernel_tiling/kernel_tiling.h, register/op_def_registry.h, tiling/...) are CANN's and stay
out; a compile of the laid-out project (scripts/check_op_package.sh) is what proves that.

Fails (exit 1, naming the file) when two sources would land on one destination, or when an
include would resolve to a different file in the project than in the tree.
"""
from __future__ import annotations

import pathlib
import re
import sys

KERNELS = pathlib.Path(__file__).resolve().parent
# Quoted includes only: <...> ones are the compiler's and the toolkit's. Commented-out
# lines do not start with '#', so they are not matched.
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def quoted_includes(path: pathlib.Path) -> list[str]:
    return INCLUDE.findall(path.read_text())


def resolve(includer: pathlib.Path, name: str, root: pathlib.Path) -> pathlib.Path | None:
    """The file of `root`'s tree an include names (relative to the includer), or None."""
    candidate = (includer.parent / name).resolve()
    if candidate.is_file() and candidate.is_relative_to(root):
        return candidate
    return None


def destination(source: pathlib.Path, ops: list[str], project: str, root: pathlib.Path) -> pathlib.PurePosixPath:
    parts = source.relative_to(root).parts
    if parts[0] in ops:
        return pathlib.PurePosixPath(project, *parts[1:])
    return pathlib.PurePosixPath(*parts)


def package_files(project: str, ops: list[str], root: pathlib.Path = KERNELS) -> list[tuple[str, str]]:
    """[(source relative to root, destination relative to the project's parent)], sorted."""
    root = root.resolve()
    placed: dict[pathlib.PurePosixPath, pathlib.Path] = {}
    pending: list[tuple[pathlib.Path, pathlib.PurePosixPath]] = []
    for op in ops:
        kernel = root / op / "op_kernel" / f"{op}.cpp"
        host = root / op / "op_host" / f"{op}_def.cpp"
        for path in (kernel, host):
            if not path.is_file():
                raise SystemExit(f"package_sources.py: op '{op}' has no {path.relative_to(root)}")
        pending.append((kernel, pathlib.PurePosixPath(project, "op_kernel", f"{project}_{op}.cpp")))
        pending.append((host, pathlib.PurePosixPath(project, "op_host", f"{project}_{op}.cpp")))
    seen: set[pathlib.Path] = set()
    while pending:
        source, dest = pending.pop()
        if dest in placed and placed[dest] != source:
            raise SystemExit(f"package_sources.py: {placed[dest].relative_to(root)} and "
                             f"{source.relative_to(root)} would both be copied to {dest}")
        placed[dest] = source
        if source in seen:
            continue
        seen.add(source)
        for name in quoted_includes(source):
            found = resolve(source, name, root)
            if found is None:
                continue  # CANN's header (or the compile will say it is missing)
            target = destination(found, ops, project, root)
            # The include must name the same file from where the includer lands.
            landed = pathlib.PurePosixPath(*_normalise((dest.parent / name).parts))
            if landed != target:
                raise SystemExit(f"package_sources.py: {source.relative_to(root)} includes \"{name}\", "
                                 f"which is {found.relative_to(root)} (copied to {target}) but would "
                                 f"name {landed} in the project")
            pending.append((found, target))
    return sorted((str(src.relative_to(root)), str(dest)) for dest, src in placed.items())


def _normalise(parts: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part == "..":
            if not out:
                raise SystemExit("package_sources.py: an include climbs above the project's parent")
            out.pop()
        elif part not in (".", ""):
            out.append(part)
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    project, *ops = argv
    for source, dest in package_files(project, ops):
        print(f"{source}\t{dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
