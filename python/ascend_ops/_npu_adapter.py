"""Whether the NPU adapter (`ascend_ops._npu`, op_plugin/csrc/npu) can run here, and why not.

Loading it takes three things, checked in this order so the reason given is the first
missing one: torch_npu importable (it needs CANN's libraries), the adapter built (setup.py
builds it when torch_npu is installed at build time), and an NPU device visible.
Importing `ascend_ops._npu` registers the NPU kernels for the PrivateUse1 dispatch key.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
from types import ModuleType

#: torch_npu names the PrivateUse1 device "npu"; "privateuseone" is its name before that.
NPU_DEVICE_TYPES = ("npu", "privateuseone")

INSTALL_HINT = ("see docs/npu.md: install CANN and torch-npu==2.13.0, "
                "then rebuild ascend_ops")


@functools.cache
def _load() -> tuple[ModuleType | None, ModuleType | None, str | None]:
    """(torch_npu, ascend_ops._npu, None), or Nones and the reason one did not load."""
    if importlib.util.find_spec("torch_npu") is None:
        return None, None, f"torch_npu is not installed ({INSTALL_HINT})"
    try:
        import torch_npu
    except Exception as error:  # ImportError, OSError, RuntimeError: CANN missing or broken
        return None, None, f"torch_npu not importable: {type(error).__name__}: {error}"
    try:
        from . import _npu
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
