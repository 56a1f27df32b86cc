"""linear_cross_entropy's argument checks (SPEC §6), run once before any work.

linear_cross_entropy has several paths (the CPU bfloat16 path that forms the logits
gradient in the forward, the operator path, single device or a process group), and not all
of them reach the operators' own checks (validation.cpp): this states the whole contract
once, for every path. Plain Python on types, dtypes, shapes and ints, so torch.compile
traces through it without a graph break.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .._arguments import require_int, require_tensor

__all__ = ["check_linear_cross_entropy", "check_options", "LCE_DTYPES", "CPU_LCE_DTYPES",
           "TARGET_DTYPES"]

_OP = "linear_cross_entropy"

#: input's and weight's dtypes (SPEC §6): the operators' on every device, and float32 on
#: CPU tensors (the loss options' kernels run it on ATen's fp32 GEMM, SPEC §7).
LCE_DTYPES = (torch.float16, torch.bfloat16)
CPU_LCE_DTYPES = LCE_DTYPES + (torch.float32,)
TARGET_DTYPES = (torch.int32, torch.int64)


def _names(dtypes: tuple[torch.dtype, ...]) -> str:
    return " or ".join(str(d) for d in dtypes)


def check_linear_cross_entropy(input, weight, target, ignore_index, reduction, process_group,
                               vocab_start_index, mode, *, modes, reductions) -> None:
    """Raise TypeError (a wrong kind or dtype) or ValueError (a wrong shape, device or
    value) naming the argument; return None when the call is valid."""
    require_tensor(_OP, "input", input)
    require_tensor(_OP, "weight", weight)
    require_tensor(_OP, "target", target)
    check_options(ignore_index, reduction, process_group, vocab_start_index, mode,
                  modes=modes, reductions=reductions)

    allowed = CPU_LCE_DTYPES if input.device.type == "cpu" else LCE_DTYPES
    if input.dtype not in allowed:
        where = "" if input.device.type == "cpu" else f" on {input.device.type} tensors"
        raise TypeError(f"{_OP}: 'input' must be {_names(allowed)}{where}, got {input.dtype}")
    if input.dim() < 1:
        raise ValueError(f"{_OP}: 'input' must be [*, H] (at least 1-D), got a 0-D tensor")
    if weight.dtype != input.dtype:
        raise TypeError(f"{_OP}: 'weight' must have the dtype of 'input' ({input.dtype}), "
                        f"got {weight.dtype}")
    if weight.dim() != 2 or weight.size(1) != input.size(-1):
        raise ValueError(f"{_OP}: 'weight' must be [V, H] with H = {input.size(-1)} "
                         f"(input.size(-1)), got shape {list(weight.shape)}")
    if target.dtype not in TARGET_DTYPES:
        raise TypeError(f"{_OP}: 'target' must be {_names(TARGET_DTYPES)} (vocabulary ids), "
                        f"got {target.dtype}")
    if tuple(target.shape) != tuple(input.shape[:-1]):
        raise ValueError(f"{_OP}: 'target' must have input's leading shape "
                         f"{tuple(input.shape[:-1])}, got {tuple(target.shape)}")
    for name, t in (("weight", weight), ("target", target)):
        if t.device != input.device:
            raise ValueError(f"{_OP}: '{name}' must be on the device of 'input' "
                             f"({input.device}), got {t.device}")



def check_options(ignore_index, reduction, process_group, vocab_start_index, mode, *, modes,
                  reductions) -> None:
    """The arguments that are not tensors (also checked by LinearCrossEntropyLoss when it is
    built, so that a bad option fails there and not at the first step)."""
    if mode not in modes:
        raise ValueError(f"{_OP}: 'mode' must be one of {modes}, got {mode!r}")
    if reduction not in reductions:
        raise ValueError(f"{_OP}: 'reduction' must be one of {reductions}, got {reduction!r}")
    require_int(_OP, "ignore_index", ignore_index)
    require_int(_OP, "vocab_start_index", vocab_start_index, optional=True)
    if vocab_start_index is not None and vocab_start_index < 0:
        raise ValueError(f"{_OP}: 'vocab_start_index' must be >= 0 (a shard's first global "
                         f"id), got {vocab_start_index}")
    if process_group is not None and not dist.is_initialized():
        raise ValueError(f"{_OP}: 'process_group' given but torch.distributed is not "
                         f"initialized")
