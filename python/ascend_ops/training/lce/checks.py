"""linear_cross_entropy's argument checks (SPEC §6), run once before any work, and the
call they make: `make_call` checks every argument of the public function (TypeError for a
wrong kind or dtype, ValueError for a wrong shape, device or value, each naming the
argument) and returns the one `LceCall` every route reads, with the defaults filled in.

No route checks an argument again. Plain Python on types, dtypes, shapes and numbers, so
torch.compile traces through it without a graph break.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from ..._arguments import (require_bool, require_int, require_number, require_optional_tensor,
                           require_tensor)
from .call import MODES, REDUCTIONS, LceCall, LossOptions

__all__ = ["make_call", "check_linear_cross_entropy", "check_options", "check_loss_options",
           "check_option_tensors", "LCE_DTYPES", "CPU_LCE_DTYPES", "TARGET_DTYPES"]

_OP = "linear_cross_entropy"

#: input's and weight's dtypes (SPEC §6): the operators' on every device, and float32 on
#: CPU tensors (the loss options' kernels run it on ATen's fp32 GEMM, SPEC §7).
LCE_DTYPES = (torch.float16, torch.bfloat16)
CPU_LCE_DTYPES = LCE_DTYPES + (torch.float32,)
TARGET_DTYPES = (torch.int32, torch.int64)


def make_call(input, weight, target, *, linear_bias, ce_weight, ignore_index, reduction,
              label_smoothing, logit_scale, softcap, lse_square_scale, return_z_loss,
              return_lse, return_token_accuracy, process_group, vocab_start_index,
              mode) -> LceCall:
    """Every argument of linear_cross_entropy checked, as one LceCall."""
    check_linear_cross_entropy(input, weight, target, ignore_index, reduction, process_group,
                               vocab_start_index, mode)
    options = check_loss_options(label_smoothing, logit_scale, softcap, lse_square_scale,
                                 return_z_loss, return_lse, return_token_accuracy)
    check_option_tensors(input, weight, linear_bias, ce_weight)
    if vocab_start_index is None:
        rank = 0 if process_group is None else dist.get_rank(process_group)
        vocab_start_index = rank * weight.size(0)
    # Inside an autograd.Function grad mode is off and needs_input_grad ignores
    # torch.no_grad(): whether a gradient will be asked for is read here.
    needs_grad = torch.is_grad_enabled() and (
        input.requires_grad or weight.requires_grad
        or (linear_bias is not None and linear_bias.requires_grad))
    return LceCall(input, weight, target, linear_bias, ce_weight, options, ignore_index,
                   reduction, process_group, vocab_start_index, mode, needs_grad)


def _names(dtypes: tuple[torch.dtype, ...]) -> str:
    return " or ".join(str(d) for d in dtypes)


def check_linear_cross_entropy(input, weight, target, ignore_index, reduction, process_group,
                               vocab_start_index, mode) -> None:
    """Raise TypeError (a wrong kind or dtype) or ValueError (a wrong shape, device or
    value) naming the argument; return None when the call is valid."""
    require_tensor(_OP, "input", input)
    require_tensor(_OP, "weight", weight)
    require_tensor(_OP, "target", target)
    check_options(ignore_index, reduction, process_group, vocab_start_index, mode)

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



def check_options(ignore_index, reduction, process_group, vocab_start_index, mode) -> None:
    """The arguments that are not tensors (also checked by LinearCrossEntropyLoss when it is
    built, so that a bad option fails there and not at the first step)."""
    if mode not in MODES:
        raise ValueError(f"{_OP}: 'mode' must be one of {MODES}, got {mode!r}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{_OP}: 'reduction' must be one of {REDUCTIONS}, got {reduction!r}")
    require_int(_OP, "ignore_index", ignore_index)
    require_int(_OP, "vocab_start_index", vocab_start_index, optional=True)
    if vocab_start_index is not None and vocab_start_index < 0:
        raise ValueError(f"{_OP}: 'vocab_start_index' must be >= 0 (a shard's first global "
                         f"id), got {vocab_start_index}")
    if process_group is not None and not dist.is_initialized():
        raise ValueError(f"{_OP}: 'process_group' given but torch.distributed is not "
                         f"initialized")


def check_loss_options(label_smoothing, logit_scale, softcap, lse_square_scale,
                       return_z_loss, return_lse, return_token_accuracy) -> LossOptions:
    """The scalar options, checked (TypeError for a wrong kind, ValueError for a value
    outside its range); returns them as LossOptions with floats."""
    require_number(_OP, "label_smoothing", label_smoothing)
    require_number(_OP, "logit_scale", logit_scale)
    require_number(_OP, "lse_square_scale", lse_square_scale)
    if softcap is not None:
        require_number(_OP, "softcap", softcap)
    for name, flag in (("return_z_loss", return_z_loss), ("return_lse", return_lse),
                       ("return_token_accuracy", return_token_accuracy)):
        require_bool(_OP, name, flag)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{_OP}: 'label_smoothing' must lie in [0, 1], got {label_smoothing}")
    if not (math.isfinite(logit_scale) and logit_scale > 0.0):
        raise ValueError(f"{_OP}: 'logit_scale' must be a finite number > 0, got {logit_scale}")
    if softcap is not None and not (math.isfinite(softcap) and softcap > 0.0):
        raise ValueError(f"{_OP}: 'softcap' must be a finite number > 0 (or None for no "
                         f"soft-capping), got {softcap}")
    if not (math.isfinite(lse_square_scale) and lse_square_scale >= 0.0):
        raise ValueError(f"{_OP}: 'lse_square_scale' must be a finite number >= 0, got "
                         f"{lse_square_scale}")
    return LossOptions(float(label_smoothing), float(logit_scale),
                       None if softcap is None else float(softcap), float(lse_square_scale),
                       return_z_loss, return_lse, return_token_accuracy)


def check_option_tensors(input: torch.Tensor, weight: torch.Tensor, linear_bias, ce_weight) -> None:
    """linear_bias [V] in input's dtype; ce_weight [V] floating; both on input's device."""
    require_optional_tensor(_OP, "linear_bias", linear_bias)
    require_optional_tensor(_OP, "ce_weight", ce_weight)
    vocab = weight.size(0) if weight.dim() == 2 else None
    if linear_bias is not None:
        if linear_bias.dtype != input.dtype:
            raise TypeError(f"{_OP}: 'linear_bias' must have the dtype of 'input' "
                            f"({input.dtype}), got {linear_bias.dtype}")
        if tuple(linear_bias.shape) != (vocab,):
            raise ValueError(f"{_OP}: 'linear_bias' must be [V] = [{vocab}] (this shard's "
                             f"classes), got shape {list(linear_bias.shape)}")
    if ce_weight is not None:
        if ce_weight.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            raise TypeError(f"{_OP}: 'ce_weight' must be a floating dtype (float16, bfloat16, "
                            f"float32 or float64), got {ce_weight.dtype}")
        if tuple(ce_weight.shape) != (vocab,):
            raise ValueError(f"{_OP}: 'ce_weight' must be [V] = [{vocab}] (this shard's "
                             f"classes), got shape {list(ce_weight.shape)}")
    for name, t in (("linear_bias", linear_bias), ("ce_weight", ce_weight)):
        if t is not None and t.device != input.device:
            raise ValueError(f"{_OP}: '{name}' must be on the device of 'input' "
                             f"({input.device}), got {t.device}")
