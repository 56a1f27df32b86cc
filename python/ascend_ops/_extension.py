"""Loading of the native library `ascend_ops._C`, tolerant of its absence.

Importing `_C` registers the operators (schemas and CPU kernels) and brings the shared
validation. If it cannot load, `import ascend_ops` still works: the reference (and the
simulator, a library of its own) run with the same checks stated in Python
(`_validation.py`), and `ascend_ops.available_impls()` says why cpu and npu cannot. Set ASCEND_OPS_SKIP_NATIVE=1 to skip loading it on purpose.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType

import torch  # noqa: F401  (loads libtorch and libc10, which _C links against)

_log = logging.getLogger("ascend_ops")

_native: ModuleType | None = None
load_error: str | None = None

if os.environ.get("ASCEND_OPS_SKIP_NATIVE") == "1":
    load_error = "ascend_ops._C not loaded: ASCEND_OPS_SKIP_NATIVE=1"
else:
    try:
        from ascend_ops import _C as _native
    except ImportError as error:  # a missing or unloadable shared library
        load_error = f"ascend_ops._C failed to load: {error}"
        _log.warning("%s; impl='cpu' and 'npu' cannot run", load_error)


def native() -> ModuleType:
    """The loaded `_C` module; raises RuntimeError with the load error when there is none."""
    if _native is None:
        raise RuntimeError(load_error)
    return _native


def checks() -> ModuleType:
    """The input checks: `_C`'s (op_plugin/csrc/validation.cpp) when it is loaded, else
    their Python statement in `_validation.py`, with the same rules and messages."""
    if _native is not None:
        return _native
    from . import _validation

    return _validation
