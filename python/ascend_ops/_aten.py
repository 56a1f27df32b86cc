"""Our CPU kernel under aten::batch_norm_backward_reduce, which PyTorch leaves without one.

Registered at import only when the dispatcher has no CPU kernel there, so a PyTorch that
brings its own keeps it. `status()` says what happened and why.
"""

from __future__ import annotations

import torch

from ._extension import load_error, native

OP = "aten::batch_norm_backward_reduce"
_status = "not attempted"


def register() -> bool:
    """Register the kernel if aten has none on CPU; True if ours serves the op now."""
    global _status
    if load_error is not None:
        _status = f"not registered: {load_error}"
        return False
    if _status.startswith("registered"):
        return True
    if torch._C._dispatch_has_kernel_for_dispatch_key(OP, "CPU"):
        _status = "not registered: a CPU kernel is already registered"
        return False
    native().register_aten_batch_norm_backward_reduce_cpu()
    _status = "registered: ascend_ops' batch_norm_reduce_backward serves it on CPU"
    return True


def status() -> str:
    """Whether ascend_ops serves aten::batch_norm_backward_reduce on CPU, and why (not)."""
    return f"{OP} on CPU: {_status}"
