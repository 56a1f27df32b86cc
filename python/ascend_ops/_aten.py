"""Our CPU kernels under aten's sync-BN operators, which PyTorch serves only on CUDA/MPS:
batch_norm_stats, batch_norm_gather_stats_with_counts, batch_norm_elemt,
batch_norm_backward_reduce and batch_norm_backward_elemt (SPEC §2, §2b).

Each is registered at import only when the dispatcher has no CPU kernel for it, so a
PyTorch that brings its own keeps it. `status()` says what happened to each and why.
"""

from __future__ import annotations

import torch

from ._extension import load_error, native

OPS = ("batch_norm_stats", "batch_norm_gather_stats_with_counts", "batch_norm_elemt",
       "batch_norm_backward_reduce", "batch_norm_backward_elemt")
_status: dict[str, str] = {op: "not attempted" for op in OPS}


def register() -> bool:
    """Register each kernel aten has none of on CPU; True if ours serve all five now."""
    for op in OPS:
        if load_error is not None:
            _status[op] = f"not registered: {load_error}"
        elif _status[op].startswith("registered"):
            continue
        elif torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", "CPU"):
            _status[op] = "not registered: a CPU kernel is already registered"
        else:
            native().register_aten_batch_norm_cpu(op)
            _status[op] = "registered: ascend_ops serves it on CPU"
    return all(serves(op) for op in OPS)


def serves(op: str) -> bool:
    """True when our kernel serves aten::<op> on CPU in this process."""
    return _status[op].startswith("registered")


def status() -> str:
    """One line per operator: whether ascend_ops serves aten::<op> on CPU, and why (not)."""
    return "\n".join(f"aten::{op} on CPU: {_status[op]}" for op in OPS)
