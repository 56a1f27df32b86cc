"""The per-architecture split of the native sources (setup.py, op_plugin/csrc/cpu/isa_builds.h):
x86-only code is compiled only for an x86-64 target and named by portable files only under
`#if ASCEND_OPS_X86_KERNELS`, so an aarch64 build compiles, references and reaches none of it;
the built library is checked for it too."""

import ast
import pathlib
import platform
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CSRC = ROOT / "op_plugin" / "csrc"

# What only an x86-64 compiler accepts or an x86 libtorch exports.
X86_ONLY_MARKERS = re.compile(r"#pragma GCC target|<immintrin\.h>|_mm_prefetch|Sleef_\w+(avx|16_)|"
                              r"__builtin_cpu_supports")
# Names of the x86 kernels and their drivers, as portable files call them.
X86_KERNEL_NAMES = re.compile(r"\bavx2::|\bbn_avx512::|\bbn_avx2::|\bbf16_gemm(_rounded)?\b|"
                              r"\bavx2_bf16_gemm(_rounded)?\b|\bgemm_packed\b|\bpack_[ab]\b|"
                              r"\blogits_grad_row\b|\bround_to_bf16\b|\brescale_bf16\b|"
                              r"[^_]\brow_max\(|[^_]\bexp_sum\(")


def x86_only_sources() -> set[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "X86_ONLY_SOURCES"
                                                for t in node.targets):
            return {elt.value for elt in node.value.args[0].elts}
    raise AssertionError("setup.py defines no X86_ONLY_SOURCES")


def portable_sources() -> list[pathlib.Path]:
    files = [p for p in CSRC.rglob("*") if p.suffix in (".cpp", ".h") and "npu" not in p.parts]
    return [p for p in files if str(p.relative_to(ROOT)) not in x86_only_sources()]


def unguarded_lines(path: pathlib.Path) -> list[tuple[int, str]]:
    """Lines outside every `#if ASCEND_OPS_X86_KERNELS` branch (its #else branch is outside)."""
    stack: list[bool] = []  # per open #if: whether its current branch is the x86 one
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        directive = line.strip()
        if re.match(r"#\s*if", directive):
            stack.append(directive.replace(" ", "") == "#ifASCEND_OPS_X86_KERNELS")
        elif re.match(r"#\s*(else|elif)", directive):
            stack[-1] = False
        elif re.match(r"#\s*endif", directive):
            stack.pop()
        elif not any(stack) and not directive.startswith("//"):
            out.append((number, line.split("//")[0]))
    return out


def test_every_file_with_x86_only_code_is_compiled_for_x86_only():
    listed = x86_only_sources()
    assert all((ROOT / p).is_file() for p in listed), "X86_ONLY_SOURCES names a missing file"
    for path in portable_sources():
        if path.name == "cpu_features.cpp":  # asks __builtin_cpu_supports under the guard
            continue
        hits = [(n, text) for n, text in unguarded_lines(path) if X86_ONLY_MARKERS.search(text)]
        assert not hits, f"{path.relative_to(ROOT)} has x86-only code outside the guard: {hits}"


def test_portable_files_name_x86_kernels_only_under_the_guard():
    for path in portable_sources():
        if path.suffix != ".cpp":
            continue  # headers declare; only a call or an address makes a reference
        hits = [(n, text) for n, text in unguarded_lines(path) if X86_KERNEL_NAMES.search(text)]
        assert not hits, f"{path.relative_to(ROOT)} names x86 kernels outside the guard: {hits}"


def test_the_guard_finds_guarded_and_unguarded_lines(tmp_path):
    source = tmp_path / "probe.cpp"
    source.write_text("a();\n#if ASCEND_OPS_X86_KERNELS\nb();\n#if X\nc();\n#endif\n#else\nd();\n"
                      "#endif\ne();\n")
    assert [text for _, text in unguarded_lines(source)] == ["a();", "d();", "e();"]


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_the_built_library_holds_x86_kernels_only_on_x86():
    from ascend_ops import _C

    symbols = subprocess.run(["nm", "-C", "--defined-only", _C.__file__], check=True,
                             capture_output=True, text=True).stdout
    x86 = [s for s in ("ascend_ops::cpu::avx2::gemm_packed", "ascend_ops::cpu::bf16_gemm(",
                       "ascend_ops::cpu::bn_avx512::kLoops") if s in symbols]
    if platform.machine() in ("x86_64", "AMD64"):
        assert len(x86) == 3, x86
    else:
        assert x86 == []
    assert "ascend_ops::cpu::bn_portable::kLoops" in symbols
