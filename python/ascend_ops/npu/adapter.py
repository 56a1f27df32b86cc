"""Whether the NPU adapter (`ascend_ops._npu`, op_plugin/csrc/npu) can run here, and why not.

Loading it takes three things, checked in this order so the reason given is the first
missing one: torch_npu importable (it needs CANN's libraries), the adapter built (setup.py
builds it when torch_npu is installed at build time), and an NPU device visible.
Importing `ascend_ops._npu` registers the NPU kernels for the PrivateUse1 dispatch key.

Then, per operator: "npu" needs CANN's built-in aclnn op in the installed CANN, and
"npu_custom" needs our custom op package (ascendc_kernels/, vendor "ascend_ops") where
torch_npu looks for custom op packages, with the op's entry point.

torch_npu finds custom op packages by two variables it reads once, when libtorch_npu.so
loads: each directory on ASCEND_CUSTOM_OPP_PATH, then $ASCEND_OPP_PATH/vendors/<name> for
each name of the `load_priority=` line of $ASCEND_OPP_PATH/vendors/config.ini (where a
default install of a package registers itself). We read them once too, when we load
torch_npu, and answer from that: a variable changed later changes neither torch_npu's
search nor ours. Everything here is decided once per process and cached, so choosing an
implementation on each op call neither searches the file system nor asks for the
device count.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import pathlib
from types import ModuleType

#: torch_npu names the PrivateUse1 device "npu"; "privateuseone" is its name before that.
NPU_DEVICE_TYPES = ("npu", "privateuseone")

INSTALL_HINT = ("see docs/npu.md: install CANN and torch-npu==2.13.0, "
                "then rebuild ascend_ops")

#: The custom op package's vendor directory name and the library its aclnn ops live in.
PACKAGE_VENDOR = "ascend_ops"
PACKAGE_LIBRARY = pathlib.Path("op_api") / "lib" / "libcust_opapi.so"
PACKAGE_HINT = ("the ascend_ops op package is not installed: build it with "
                "ascendc_kernels/build.sh, see docs/npu.md")


def _once_per_process(function):
    """`function`'s answer per argument tuple, computed once. A dict rather than
    functools.cache: torch.compile traces through a functools cache with a warning on
    every compile of an op, and reads a dict as it is."""
    answers: dict = {}

    @functools.wraps(function)
    def cached(*args):
        if args not in answers:
            answers[args] = function(*args)
        return answers[args]
    return cached


_search_environment: tuple[str | None, str | None] | None = None


def package_search_environment() -> tuple[str | None, str | None]:
    """(ASCEND_CUSTOM_OPP_PATH, ASCEND_OPP_PATH) as torch_npu reads them: once. Taken when
    we load torch_npu (or first ask), the moment closest to its own reading."""
    global _search_environment
    if _search_environment is None:
        _search_environment = (os.environ.get("ASCEND_CUSTOM_OPP_PATH"),
                               os.environ.get("ASCEND_OPP_PATH"))
    return _search_environment


@_once_per_process
def _load() -> tuple[ModuleType | None, ModuleType | None, str | None]:
    """(torch_npu, ascend_ops._npu, None), or Nones and the reason one did not load."""
    package_search_environment()
    if importlib.util.find_spec("torch_npu") is None:
        return None, None, f"torch_npu is not installed ({INSTALL_HINT})"
    try:
        import torch_npu
    except Exception as error:  # ImportError, OSError, RuntimeError: CANN missing or broken
        return None, None, f"torch_npu not importable: {type(error).__name__}: {error}"
    try:
        from .. import _npu
    except ModuleNotFoundError:
        return torch_npu, None, ("the NPU adapter ascend_ops._npu was not built (torch_npu "
                                 "was not installed when ascend_ops was built); rebuild "
                                 "with ASCEND_OPS_NPU=1")
    except ImportError as error:
        return torch_npu, None, f"ascend_ops._npu failed to load: {error}"
    installed = ".".join(importlib.metadata.version("torch-npu").split(".")[:2])
    if installed != _npu.torch_npu_version:
        return torch_npu, None, (f"ascend_ops._npu was built for torch_npu "
                                 f"{_npu.torch_npu_version}, torch_npu {installed} is "
                                 "installed; rebuild ascend_ops")
    return torch_npu, _npu, None


@_once_per_process
def unavailable_reason() -> str | None:
    """None when the NPU adapter can run, else why it cannot."""
    torch_npu, adapter, reason = _load()
    if adapter is None:
        return reason
    count = torch_npu.npu.device_count()
    if count == 0:
        return "no NPU device visible (torch_npu.npu.device_count() == 0)"
    return None


def adapter() -> ModuleType:
    """The loaded `ascend_ops._npu`; raises RuntimeError with the reason when it cannot load."""
    _, module, reason = _load()
    if module is None:
        raise RuntimeError(f"npu: {reason}")
    return module


def vendor_priority(opp_path: str | None) -> list[pathlib.Path]:
    """$ASCEND_OPP_PATH/vendors/<name> for each name on the `load_priority=` line of
    vendors/config.ini (comma-separated, highest priority first), as torch_npu reads it;
    [] without the file or the line."""
    if not opp_path:
        return []
    vendors = pathlib.Path(opp_path) / "vendors"
    try:
        lines = (vendors / "config.ini").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        if line.startswith("load_priority="):
            names = line.removeprefix("load_priority=").strip().split(",")
            return [vendors / name.strip() for name in names if name.strip()]
    return []


def custom_package_dirs(custom_opp_path: str | None, opp_path: str | None = None) -> list[pathlib.Path]:
    """The vendor directories torch_npu searches for custom op packages, in its order:
    the entries of ASCEND_CUSTOM_OPP_PATH (':'-separated, as a package's set_env.bash
    writes it), then those of $ASCEND_OPP_PATH/vendors/config.ini."""
    on_path = [pathlib.Path(e) for e in (custom_opp_path or "").split(os.pathsep) if e]
    return on_path + vendor_priority(opp_path)


def _current_uid() -> int:
    return os.getuid()


def _owner_uid(path: pathlib.Path) -> int:
    return path.stat().st_uid


def owner_refusal(library: pathlib.Path) -> str | None:
    """Why torch_npu would skip `library` for who owns it, or None when it loads it.

    torch_npu's GetOpApiFuncAddr checks the owner of each custom package's real
    libcust_opapi.so (op-plugin op_plugin/utils/op_api_common.cpp:36-54, checkOwner):
    root loads only root's files; any other user loads their own files and root's."""
    real = library.resolve()
    uid, owner = _current_uid(), _owner_uid(real)
    if owner == uid or (uid != 0 and owner == 0):
        return None
    return (f"{real} belongs to uid {owner} and this process runs as uid {uid}: torch_npu "
            "skips a custom op package's library not owned by the current user (or, for a "
            "non-root user, by root); chown it, or build and install the package as this user")


def _search_custom_packages(custom_opp_path: str | None,
                            opp_path: str | None) -> tuple[pathlib.Path | None, list[str]]:
    """(the first vendors/ascend_ops directory torch_npu would load, the reasons it skips
    the ones before it for their owner)."""
    skipped = []
    for vendor in custom_package_dirs(custom_opp_path, opp_path):
        library = vendor / PACKAGE_LIBRARY
        if vendor.name != PACKAGE_VENDOR or not library.is_file():
            continue
        refusal = owner_refusal(library)
        if refusal is None:
            return vendor, skipped
        skipped.append(refusal)
    return None, skipped


def find_custom_package(custom_opp_path: str | None, opp_path: str | None = None) -> pathlib.Path | None:
    """The first vendors/ascend_ops directory torch_npu searches (custom_package_dirs) that
    holds op_api/lib/libcust_opapi.so owned as torch_npu requires (owner_refusal), else None."""
    return _search_custom_packages(custom_opp_path, opp_path)[0]


@_once_per_process
def _aclnn_available(adapter_module: ModuleType, name: str, custom_opp_path: str | None) -> bool:
    """adapter.aclnn_available(name), asked once per process and package path: the lookup
    searches the file system, and what is installed does not change while we run."""
    return adapter_module.aclnn_available(name)


def _ops(adapter_module: ModuleType) -> dict[str, tuple[str, str, str | None]]:
    """{op: (built-in aclnn name, CANN release, custom aclnn name or None)} of the build."""
    return {op: (aclnn, cann, custom) for op, aclnn, cann, custom in adapter_module.npu_ops()}


def builtin_unavailable_reason(op: str, adapter_module: ModuleType) -> str | None:
    """None when CANN's built-in aclnn op behind `op` resolves, else why not."""
    ops = _ops(adapter_module)
    if op not in ops:
        return f"this build of the NPU adapter has no kernel for {op}"
    aclnn, cann, _ = ops[op]
    if not _aclnn_available(adapter_module, aclnn, None):
        return f"CANN lacks {aclnn} (needs CANN >= {cann})"
    return None


def custom_unavailable_reason(op: str | None, adapter_module: ModuleType,
                              custom_opp_path: str | None,
                              opp_path: str | None = None) -> str | None:
    """None when our op package provides `op` (every op of the package when None),
    else why not; the package is looked for as torch_npu looks (custom_package_dirs)."""
    ops = _ops(adapter_module)
    wanted = [op] if op is not None else [name for name, (_, _, c) in ops.items() if c]
    for name in wanted:
        if name not in ops or ops[name][2] is None:
            return f"the ascend_ops op package has no kernel for {name}"
    vendor, skipped = _search_custom_packages(custom_opp_path, opp_path)
    if vendor is None and skipped:
        return "the ascend_ops op package is installed but torch_npu will not load it: " + \
            "; ".join(skipped)
    if vendor is None:
        return (f"{PACKAGE_HINT} (no {PACKAGE_VENDOR}/{PACKAGE_LIBRARY} under "
                f"ASCEND_CUSTOM_OPP_PATH={custom_opp_path or ''!r} nor in the load_priority "
                f"of $ASCEND_OPP_PATH/vendors/config.ini, ASCEND_OPP_PATH={opp_path or ''!r}; "
                "torch_npu reads both when it loads)")
    for name in wanted:
        entry = ops[name][2]
        if not _aclnn_available(adapter_module, entry, custom_opp_path):
            return (f"the ascend_ops op package at {vendor} lacks {entry}: rebuild it with "
                    "ascendc_kernels/build.sh")
    return None


@_once_per_process
def op_unavailable_reason(impl: str, op: str | None = None) -> str | None:
    """None when `impl` ("npu" or "npu_custom") can run `op` (or, op=None, every op it
    covers) here, else the first missing piece."""
    reason = unavailable_reason()
    if reason is not None:
        return reason
    _, module, _ = _load()
    if impl == "npu_custom":
        return custom_unavailable_reason(op, module, *package_search_environment())
    names = [op] if op is not None else list(_ops(module))
    missing = [r for r in (builtin_unavailable_reason(n, module) for n in names) if r]
    return "; ".join(missing) or None


def run_custom(op: str, *args, **kwargs):
    """`op` on our custom op package (impl="npu_custom")."""
    return getattr(adapter(), f"{op}_custom")(*args, **kwargs)
