"""The docs cannot go stale silently: every relative link resolves inside the repository
(its #anchor to a heading), every repository path named in the Markdown and in the code's
comments and docstrings exists, every section a comment quotes is a heading of that doc, and
every "SPEC §N" cited in the code is a section of docs/SPEC.md.

A path is a token with a known top-level folder of this repository (`python/...`,
`tests/...`) or a source file's extension (`.py`, `.cpp`, `.h`, ...); the first is looked up
exactly, the second as the end of some repository path (`training/lce/routes.py`,
`cpu/gemm/gemm.h`), so a file that moves breaks every mention of its old place. `…`, `...`,
`*` and `<name>` stand for any characters, `{h,cpp}` for each alternative. Files of other
projects cited by name (CANN's, torch_npu's) are listed in EXTERNAL, each with its owner.
"""

from __future__ import annotations

import ast
import fnmatch
import io
import itertools
import os
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SKIPPED_TOP = {".git", "build", "build-sanitize", "results"}  # .gitignore's build output
SKIPPED_DIRS = {"__pycache__", ".pytest_cache"}
TOP_LEVEL = ("python", "op_plugin", "ascendc_kernels", "scripts", "tests", "docs", ".ci")
CODE_DIRS = ("python", "op_plugin", "ascendc_kernels", "scripts", "tests", ".ci")
C_SUFFIXES = {".cpp", ".h", ".inc", ".cc", ".hpp", ".c"}
HASH_SUFFIXES = {".sh", ".yaml", ".yml"}
# A token without a known top-level folder is a path when it ends in one of these: source
# files. Data files (.csv, .json, .png) are named on command lines as outputs too, so they
# are checked only under a top-level folder.
SOURCE_SUFFIXES = {".py", ".cpp", ".h", ".inc", ".cc", ".hpp", ".md", ".sh", ".yaml", ".yml"}

# Files of other projects the docs and comments cite, by name or by their own path.
EXTERNAL = {
    # CANN (hicann/ops-nn, ops-math, asc-devkit, the CANN toolkit), cited with their lines
    "aclnn_batch_norm_backward_reduce.cpp", "aclnn_batch_norm_stats.cpp",
    "aclnn_batch_norm_gather_stats_with_counts.cpp", "aclnn_batch_norm_elemt.cpp",
    "aclnn_batch_norm_elemt_backward.cpp", "aclnn_fused_linear_online_max_sum.cpp",
    "aclnn_fused_linear_cross_entropy_loss_grad.cpp",
    "fused_linear_cross_entropy_loss_grad_tiling.cpp", "tiling.cpp",  # cited short, with lines
    "fused_linear_cross_entropy_loss_grad_high_perf.h",
    "fused_linear_cross_entropy_loss_grad_mem_friendly.h", "mem_friendly.h",
    "fused_linear_cross_entropy_loss_grad_config.h", "fused_linear_online_max_sum.h",
    "executor_aclnnFusedLinearCrossEntropyLossGrad.py", "executor_aclnnBatchNormReduceBackward.py",
    "executor_aclnnFusedLinearOnlineMaxSum.py", "golden.py", "tests/st/.../executor_*.py",
    "tests/assets/golden.py", "platform_ascendc.cpp", "kernel_tpipe_base.h", "kernel_tpipe_impl.h",
    "kernel_tquebind_impl.h", "kernel_macros.h", "kfc_register_obj.h",
    "kernel_operator_common_impl.h", "matmul_tiling_algorithm.cpp", "tiling_api.h",
    "matmul_tiling.h", "kernel_tiling.h", "kernel_operator.h", "kernel_reg.h",
    "kernel_utils_constants.h", "gen_kernel_tiling_data_def.py", "matmul_tilingdata.h",
    "op_api_def.h", "aclnn_check.h", "acl_base.h", "acl_meta.h", "op_tiling_prelude.h",
    "data_copy_wrapper_nd.h", "kernel_struct_data_copy.h", "platform_ascendc.h",
    "platform_ascendc_log.h", "kernel_operator_data_copy_base_impl.h", "kernel_struct_fixpipe.h",
    "high_perf.h",
    "ascend_ops_<op>.cpp",  # the names build.sh gives our sources in the msopgen project
    "shared/tools/cann-matmul-tiling/README.md",  # the shared tool CI places beside the clone
    # torch_npu and Ascend/op-plugin (which has an op_plugin/ folder of its own)
    "op_plugin/config/op_plugin_functions.yaml", "op_plugin_functions.yaml", "op_api_common.h",
    "op_api_common.cpp",
    "op_api_common_base.h", "BatchNormGatherStatsWithCountsKernelNpu.cpp", "register_npu.cpp",
    "OpParamMaker.cpp", "npu_ops.h", "npu_native_functions_by_codegen.yaml",
    "CopyKernelOpApi.cpp", "ProcessGroupHCCL.cpp", "HCCLUtils.cpp", "NPUException.cpp",
    # torch, the compilers, MKL, Linux
    "immintrin.h", "mkl_cblas.h",
}
# Folders of other projects: a path under one is theirs.
EXTERNAL_FOLDERS = ("op_plugin/utils/", "op_plugin/ops/", "torch/", "torch_npu/", "torchnpugen/",
                    "ATen/", "aten/", "c10/", "arch/", "impl/", "common/inc/", "aclnn/",
                    "include/basic_api/", "include/adv_api/", "include/utils/",  # asc-devkit's
                    "copy_tile_to_cube/")


def repository_files() -> list[str]:
    """Every file of the checkout, as a path relative to its root (build output left out)."""
    found = []
    for folder, dirs, names in os.walk(ROOT):
        relative = pathlib.Path(folder).relative_to(ROOT).parts
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")
                   and not (not relative and d in SKIPPED_TOP)]
        found += ["/".join((*relative, name)) for name in names if not name.endswith(".so")]
    return found


FILES = repository_files()

# A path segment: word characters, dots and hyphens, or a wildcard (…, ..., *, <name>), or a
# brace list of alternatives.
_SEGMENT = r"(?:[A-Za-z0-9_+-]|\.|…|\*|<[A-Za-z_]+>|\{[A-Za-z0-9_]+(?:,[A-Za-z0-9_]+)+\})+"
PATH = re.compile(rf"(?<![\w/.…*>}}$-]){_SEGMENT}(?:/{_SEGMENT})*")


def candidates(text: str) -> list[str]:
    """The tokens of `text` that name a repository path (see the module docstring)."""
    found = []
    for match in PATH.finditer(text):
        token = match.group(0).rstrip(".")
        if text[max(0, match.start() - 3):match.start()].endswith("://"):
            continue  # a URL
        while token.startswith(("./", "../")):
            token = token.split("/", 1)[1]
        top = token.split("/", 1)[0]
        suffix = pathlib.PurePosixPath(token.replace("*", "x").replace("…", "x")).suffix
        if (top in TOP_LEVEL and "/" in token) or suffix in SOURCE_SUFFIXES:
            found.append(token)
    return found


def expansions(token: str) -> list[str]:
    """fnmatch patterns for `token`: wildcards as `*`, one pattern per brace alternative."""
    pattern = re.sub(r"<[A-Za-z_]+>", "*", token.replace("...", "*").replace("…", "*"))
    groups = re.findall(r"\{([^}]*)\}", pattern)
    if not groups:
        return [pattern]
    template = re.sub(r"\{[^}]*\}", "{}", pattern)
    return [template.format(*choice) for choice in itertools.product(*(g.split(",") for g in groups))]


def exists(token: str, files: list[str] = FILES) -> bool:
    if token in EXTERNAL or token.startswith(EXTERNAL_FOLDERS):
        return True
    anchored = token.split("/", 1)[0] in TOP_LEVEL and "/" in token
    for pattern in expansions(token):
        if anchored:
            if any(fnmatch.fnmatchcase(f, pattern) or f.startswith(pattern.rstrip("/") + "/") for f in files):
                continue
            return False
        if any(fnmatch.fnmatchcase(f, pattern) or fnmatch.fnmatchcase(f, "*/" + pattern) for f in files):
            continue
        base = pattern.rsplit("/", 1)[-1]
        if any(fnmatch.fnmatchcase(name.rsplit("/", 1)[-1], base) for name in EXTERNAL):
            continue
        return False
    return True


def python_comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python source."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                found.append((token.start[0], token.string))
        tree = ast.parse(source)
    except (SyntaxError, tokenize.TokenError):
        return found
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                for offset, line in enumerate(first.value.value.splitlines()):
                    found.append((first.lineno + offset, line))
    return found


def c_comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of every // and /* */ comment of a C or C++ source, string literals
    skipped."""
    found, i, line, n = [], 0, 1, len(source)
    while i < n:
        ch = source[i]
        if source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
            found.append((line, source[i + 2:end]))
            i = end
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            end = n if end < 0 else end
            for offset, text in enumerate(source[i + 2:end].split("\n")):
                found.append((line + offset, text))
            line += source.count("\n", i, end)
            i = end + 2
        elif source.startswith('R"', i):
            delimiter = source[i + 2:source.find("(", i)]
            end = source.find(")" + delimiter + '"', i)
            end = n if end < 0 else end + len(delimiter) + 2
            line += source.count("\n", i, end)
            i = end
        elif ch in "\"'":
            j = i + 1
            while j < n and source[j] != ch and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            i = j + 1
        else:
            if ch == "\n":
                line += 1
            i += 1
    return found


def hash_comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of every # comment of a shell script or yaml file (no shebang)."""
    found = []
    for number, text in enumerate(source.splitlines(), 1):
        match = re.search(r"(?:^|\s)#(?!!)(.*)", text)
        if match and not (number == 1 and text.startswith("#!")):
            found.append((number, match.group(1)))
    return found


def comments_of(path: pathlib.Path) -> list[tuple[int, str]]:
    source = path.read_text(errors="replace")
    if path.suffix == ".py":
        return python_comments(source)
    if path.suffix in C_SUFFIXES:
        return c_comments(source)
    if path.suffix in HASH_SUFFIXES or source.startswith("#!/usr/bin/env bash") or source.startswith("#!/bin/"):
        return hash_comments(source)
    return []


def code_files() -> list[pathlib.Path]:
    names = [f for f in FILES if f.split("/", 1)[0] in CODE_DIRS] + ["setup.py"]
    return sorted(ROOT / f for f in names if not f.endswith(".md"))


def markdown_files() -> list[pathlib.Path]:
    return sorted(ROOT / f for f in FILES if f.endswith(".md"))


def stale_paths(lines: list[tuple[int, str]], where: str, files: list[str] = FILES) -> list[str]:
    return [f"{where}:{number}: names {token}, which is not in the repository"
            for number, text in lines for token in candidates(text) if not exists(token, files)]


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: lowercase, punctuation dropped,
    spaces as hyphens, a repeated one numbered."""
    anchors: set[str] = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not re.match(r"#{1,6} ", line):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        anchor, k = slug, 0
        while anchor in anchors:
            k += 1
            anchor = f"{slug}-{k}"
        anchors.add(anchor)
    return anchors


def headings(markdown: str) -> list[str]:
    return [re.sub(r"[`*]", "", line.lstrip("#").strip()) for line in markdown.splitlines()
            if re.match(r"#{1,6} ", line)]


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
QUOTED_SECTION = re.compile(r"((?:docs/)?[A-Za-z_]+\.md)[,:]?\s*\(?[\"“]([^\"”]+)[\"”]")


@pytest.mark.parametrize("doc", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_stay_inside_the_repository_and_reach_their_heading(doc):
    text = doc.read_text()
    assert "../shared" not in text, f"{doc.name} mentions a path outside the repository"
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        assert path.is_relative_to(ROOT), f"{doc.name}: {target} points outside the repository"
        assert path.exists(), f"{doc.name}: {target} does not exist"
        if anchor and path.suffix == ".md":
            assert anchor in heading_anchors(path.read_text()), \
                f"{doc.name}: {target}: no heading of {path.name} has the anchor #{anchor}"


def test_every_path_the_docs_name_exists():
    stale = []
    for doc in markdown_files():
        stale += stale_paths(list(enumerate(doc.read_text().splitlines(), 1)), str(doc.relative_to(ROOT)))
    assert not stale, "\n".join(stale)


def test_every_path_the_code_comments_name_exists():
    stale = []
    for path in code_files():
        stale += stale_paths(comments_of(path), str(path.relative_to(ROOT)))
    assert not stale, "\n".join(stale)


def test_every_doc_section_a_comment_quotes_is_a_heading():
    stale = []
    for path in code_files() + markdown_files():
        lines = comments_of(path) if path.suffix != ".md" else list(enumerate(path.read_text().splitlines(), 1))
        for number, text in lines:
            for name, section in QUOTED_SECTION.findall(text):
                matches = [f for f in FILES if f == name or f.endswith("/" + name)]
                if len(matches) != 1:
                    continue  # another project's file, or an ambiguous README: not ours to check
                if not any(h.startswith(section.strip()) for h in headings((ROOT / matches[0]).read_text())):
                    stale.append(f"{path.relative_to(ROOT)}:{number}: quotes section \"{section}\" "
                                 f"of {matches[0]}, which has no such heading")
    assert not stale, "\n".join(stale)


# ("first round" stays allowed: benchmarks and the engine choice time in rounds.)
HISTORY = re.compile(r"\bissues? ?#?\d+|\bround \d+\b|\bbug \d+\b", re.I)


def test_docs_and_comments_say_why_not_when():
    """History lives in git and CHANGELOG.md: no issue numbers, rounds or bug numbers in the
    docs or the code's comments."""
    found = []
    for path in code_files() + markdown_files():
        lines = comments_of(path) if path.suffix != ".md" else list(enumerate(path.read_text().splitlines(), 1))
        found += [f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r}"
                  for number, text in lines for match in HISTORY.finditer(text)]
    assert not found, "\n".join(found)


def test_a_made_up_stale_path_is_caught_with_its_file_and_line(tmp_path):
    files = ["python/ascend_ops/training/lce/routes.py", "op_plugin/csrc/cpu/gemm/gemm.h",
             "op_plugin/csrc/cpu/gemm/gemm.cpp", "docs/npu.md",
             "ascendc_kernels/fused_linear_cross_entropy_loss_grad/op_host/fused_linear_cross_entropy_loss_grad_def.cpp"]
    python = tmp_path / "module.py"
    python.write_text('"""Docstring naming python/ascend_ops/_cann_tiling.py."""\n'
                      "x = 'training/options.py in a string is code, not a comment'\n"
                      "# a comment: see training/options.py, cpu/gemm/{gemm,engine}.h and STYLE.md\n")
    cpp = tmp_path / "kernel.cpp"
    cpp.write_text('const char* s = "// op_plugin/csrc/not_a_comment.cpp";\n'
                   "/* block\n   naming op_plugin/csrc/npu/gone.cpp */\n")
    found = stale_paths(comments_of(python), "module.py", files) + stale_paths(comments_of(cpp), "kernel.cpp", files)
    assert found == [
        "module.py:3: names training/options.py, which is not in the repository",
        "module.py:3: names cpu/gemm/{gemm,engine}.h, which is not in the repository",
        "module.py:3: names STYLE.md, which is not in the repository",
        "module.py:1: names python/ascend_ops/_cann_tiling.py, which is not in the repository",
        "kernel.cpp:3: names op_plugin/csrc/npu/gone.cpp, which is not in the repository",
    ], found


def test_what_is_not_a_repository_path_is_left_alone():
    text = ("ascend_ops.npu.limits, torch.compile, e.g. 2.13.0, `--csv parity.csv`, "
            "https://github.com/Ascend/op-plugin/blob/master/x.py, /usr/local/Ascend/set_env.sh, "
            "$XDG_CACHE_HOME/ascend_ops/cpu_gemm_engines.tsv, custom_opp_*.run, libcust_opapi.so")
    assert candidates(text) == []
    assert exists("cpu/gemm/gemm.{h,cpp}") and exists("op_host/…_def.cpp") and exists("*KernelNpuOpApi.cpp")
    assert exists("aclnn_batch_norm_stats.cpp")  # CANN's, listed in EXTERNAL
    assert not exists("op_plugin/csrc/gone.cpp")  # under our own folder: checked exactly
    assert HISTORY.search("the rules issue 45 added") and not HISTORY.search("the first round warms up")
    assert exists("op_plugin/utils/op_api_common.cpp")  # Ascend/op-plugin's folder of that name


def test_spec_sections_cited_in_the_code_exist():
    sections = set(re.findall(r"^## (\d+)\.", (ROOT / "docs" / "SPEC.md").read_text(), re.M))
    cited = set()
    for folder in ("python", "op_plugin", "ascendc_kernels", "scripts", "tests"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".cpp", ".h", ".md"}:
                cited |= set(re.findall(r"SPEC §(\d+)", path.read_text(errors="ignore")))
    assert cited and cited <= sections, f"cited sections missing from docs/SPEC.md: {cited - sections}"


def test_docs_state_canns_limits_as_builtin_limits_derives_them():
    """The high-performance V limit has one home (op_plugin/csrc/npu/builtin_limits.cpp,
    read through ascend_ops.npu.limits): the docs state its value, never the 65280 the
    tiling's weaker check names."""
    from ascend_ops.npu.limits import builtin_limits

    limits = builtin_limits()
    v, bt = limits["flce_grad_high_perf_max_vocab"], limits["flce_grad_high_perf_max_rows"]
    for doc in (ROOT / "README.md", ROOT / "docs" / "SPEC.md", ROOT / "docs" / "npu.md"):
        text = doc.read_text()
        assert f"[128, {v}]" in text or f"128 ≤ V ≤ {v}" in text, f"{doc.name} lacks V ≤ {v}"
        assert f"{bt}" in text, f"{doc.name} lacks BT ≤ {bt}"
    for doc in markdown_files():
        text = doc.read_text()
        for line in text.splitlines():
            assert "65280" not in line or "weaker" in line, f"{doc.name} states 65280 as a limit: {line}"
