"""SPEC's input checks in Python, for when the native library `_C` cannot load.

The checks are written once, in op_plugin/csrc/validation.cpp, and every implementation
runs that copy while `_C` is loaded. Without `_C` the reference (plain torch) and the
simulator (a library of its own) still run; they must still refuse bad input with the same
error, so this module states the same rules with the same messages, argument by argument. tests/test_validation.py runs every bad-input
table through both and requires identical error types and messages.
"""

from __future__ import annotations

import torch

__all__ = ["check_fused_linear_cross_entropy_loss_grad", "check_scratch_bytes",
           "check_batch_norm_reduce_backward", "batch_norm_reduce_output_dtype", "check_fused_linear_online_max_sum",
           "check_fused_cross_entropy_loss_with_max_sum"]

_FLCE = "fused_linear_cross_entropy_loss_grad"
_BN = "batch_norm_reduce_backward"
_ONLINE = "fused_linear_online_max_sum"
_LOSS = "fused_cross_entropy_loss_with_max_sum"
_HALF = (torch.float16, torch.bfloat16)


def _shape(t: torch.Tensor) -> str:
    return str(list(t.shape))  # "[10, 8, 1]", as c10 prints sizes


def _number(x: float) -> str:
    return format(x, "g")  # as a C++ stream prints a double


def _check_dim(op: str, name: str, t: torch.Tensor, dim: int) -> None:
    if t.dim() != dim:
        raise ValueError(f"{op}: '{name}' must be {dim}-D, got a {t.dim()}-D tensor of shape {_shape(t)}")


def _check_same_device(op: str, name: str, t: torch.Tensor, input: torch.Tensor) -> None:
    if t.device != input.device:
        raise ValueError(f"{op}: '{name}' must be on the same device as 'input' ({input.device}), "
                         f"got {t.device}")


def _check_length(op: str, name: str, t: torch.Tensor, length: int, what: str) -> None:
    if t.size(0) != length:
        raise ValueError(f"{op}: '{name}' must have length {what} = {length}, got {t.size(0)}")


def _check_label_smoothing(op: str, label_smoothing: float) -> None:
    if label_smoothing != 0.0:
        raise ValueError(f"{op}: 'label_smoothing' must be 0.0 (only 0.0 is supported, as on the "
                         f"NPU), got {_number(label_smoothing)}")


def _check_row_targets(op: str, name: str, t: torch.Tensor, bt: int, input: torch.Tensor) -> None:
    if t.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{op}: '{name}' must be torch.int32 or torch.int64, got {t.dtype}")
    _check_dim(op, name, t, 1)
    _check_length(op, name, t, bt, "BT (input.size(0))")
    _check_same_device(op, name, t, input)


def _check_lm_head(op: str, input: torch.Tensor, weight: torch.Tensor) -> None:
    if input.dtype not in _HALF:
        raise TypeError(f"{op}: 'input' must be torch.float16 or torch.bfloat16, got {input.dtype}")
    _check_dim(op, "input", input, 2)
    h = input.size(1)
    if weight.dtype != input.dtype:
        raise TypeError(f"{op}: 'weight' must have the dtype of 'input' ({input.dtype}), "
                        f"got {weight.dtype}")
    _check_dim(op, "weight", weight, 2)
    if weight.size(1) != h:
        raise ValueError(f"{op}: 'weight' must be [V, H] with H = {h} (input.size(1)), "
                         f"got shape {_shape(weight)}")
    _check_same_device(op, "weight", weight, input)


def check_fused_linear_cross_entropy_loss_grad(
        grad, input, weight, target_mask, masked_target, label_smoothing, logits_max,
        sum_exp_logits, softmax, check_values: bool) -> None:
    op = _FLCE
    _check_lm_head(op, input, weight)
    bt, v = input.size(0), weight.size(0)

    if grad.dtype != torch.float32:
        raise TypeError(f"{op}: 'grad' must be torch.float32, got {grad.dtype}")
    _check_dim(op, "grad", grad, 1)
    _check_length(op, "grad", grad, bt, "BT (input.size(0))")
    _check_same_device(op, "grad", grad, input)

    _check_row_targets(op, "masked_target", masked_target, bt, input)

    if target_mask.dtype not in (torch.uint8, torch.bool):
        raise TypeError(f"{op}: 'target_mask' must be bit-packed torch.uint8 or torch.bool, "
                        f"got {target_mask.dtype}")
    _check_dim(op, "target_mask", target_mask, 1)
    if target_mask.dtype == torch.bool:
        _check_length(op, "target_mask", target_mask, bt, "BT (input.size(0)) for a bool mask")
    else:
        packed_bytes = (bt + 7) // 8
        if target_mask.size(0) < packed_bytes:
            raise ValueError(f"{op}: bit-packed 'target_mask' must hold at least ceil(BT / 8) = "
                             f"{packed_bytes} bytes for BT = {bt}, got {target_mask.size(0)}")
    _check_same_device(op, "target_mask", target_mask, input)

    _check_label_smoothing(op, label_smoothing)

    if softmax is not None:  # high-performance mode
        if softmax.dtype != torch.float32:
            raise TypeError(f"{op}: 'softmax' must be torch.float32, got {softmax.dtype}")
        _check_dim(op, "softmax", softmax, 2)
        if softmax.size(0) != bt or softmax.size(1) != v:
            raise ValueError(f"{op}: 'softmax' must be [BT, V] = [{bt}, {v}], got shape "
                             f"{_shape(softmax)}")
        _check_same_device(op, "softmax", softmax, input)
    else:  # memory-saving mode
        for name, stat in (("logits_max", logits_max), ("sum_exp_logits", sum_exp_logits)):
            if stat is None:
                raise ValueError(f"{op}: '{name}' is required when 'softmax' is None "
                                 f"(memory-saving mode), got None")
            if stat.dtype != torch.float32:
                raise TypeError(f"{op}: '{name}' must be torch.float32, got {stat.dtype}")
            _check_dim(op, name, stat, 1)
            _check_length(op, name, stat, bt, "BT (input.size(0))")
            _check_same_device(op, name, stat, input)

    if check_values and bt:
        from .masks import unpack_target_mask

        columns = masked_target.to("cpu", torch.int64)
        wrong = ~unpack_target_mask(target_mask.to("cpu"), bt) & ((columns < 0) | (columns >= v))
        if bool(wrong.any()):
            i = int(wrong.nonzero()[0])
            raise ValueError(f"{op}: 'masked_target' must lie in [0, V) = [0, {v}) on rows that "
                             f"are not masked, got masked_target[{i}] = {int(columns[i])}")


def check_scratch_bytes(op: str, scratch_bytes: int | None) -> None:
    if scratch_bytes is not None and scratch_bytes <= 0:
        raise ValueError(f"{op}: 'scratch_bytes' must be a positive number of bytes or None, "
                         f"got {scratch_bytes}")


def check_batch_norm_reduce_backward(grad_out, input, mean, invstd, weight) -> None:
    op = _BN

    def check_data_dtype(name: str, t: torch.Tensor) -> None:
        if t.dtype not in (torch.float32, *_HALF):
            raise TypeError(f"{op}: '{name}' must be torch.float32, torch.float16 or "
                            f"torch.bfloat16, got {t.dtype}")

    check_data_dtype("input", input)
    if not 2 <= input.dim() <= 8:
        raise ValueError(f"{op}: 'input' must have 2 to 8 dims [N, C, *], got a {input.dim()}-D "
                         f"tensor of shape {_shape(input)}")
    c = input.size(1)
    if c < 1:
        raise ValueError(f"{op}: 'input' must have at least one channel (C = size(1) >= 1), "
                         f"got shape {_shape(input)}")

    check_data_dtype("grad_out", grad_out)
    if grad_out.dtype != input.dtype:
        raise TypeError(f"{op}: 'grad_out' must have the dtype of 'input' ({input.dtype}), "
                        f"got {grad_out.dtype}")
    if grad_out.shape != input.shape:
        raise ValueError(f"{op}: 'grad_out' must have the shape of 'input' {_shape(input)}, "
                         f"got {_shape(grad_out)}")
    _check_same_device(op, "grad_out", grad_out, input)

    for name, t in (("mean", mean), ("invstd", invstd), ("weight", weight)):
        if t is None:  # only weight may be None
            continue
        check_data_dtype(name, t)
        _check_dim(op, name, t, 1)
        _check_length(op, name, t, c, "C (input.size(1))")
        _check_same_device(op, name, t, input)


def check_fused_linear_online_max_sum(input, weight, target, vocab_start_index,
                                      vocab_end_index) -> None:
    op = _ONLINE
    _check_lm_head(op, input, weight)
    bt, v = input.size(0), weight.size(0)
    _check_row_targets(op, "target", target, bt, input)
    if vocab_start_index < 0:
        raise ValueError(f"{op}: 'vocab_start_index' must be >= 0, got {vocab_start_index}")
    if vocab_end_index < vocab_start_index:
        raise ValueError(f"{op}: 'vocab_end_index' must be >= vocab_start_index = "
                         f"{vocab_start_index}, got {vocab_end_index}")
    # End exclusive: the shard's columns are [start, end), at most V of them.
    if v < vocab_end_index - vocab_start_index:
        raise ValueError(f"{op}: 'vocab_end_index' must be <= vocab_start_index + V = "
                         f"{vocab_start_index} + {v} (the shard holds weight.size(0) columns), "
                         f"got {vocab_end_index}")


def check_fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits,
                                                label_smoothing, input, weight,
                                                vocab_parallel_logits) -> None:
    op = _LOSS
    if logits_max.dtype != torch.float32:
        raise TypeError(f"{op}: 'logits_max' must be torch.float32, got {logits_max.dtype}")
    _check_dim(op, "logits_max", logits_max, 1)
    bt = logits_max.size(0)
    for name, t in (("sum_exp_logits", sum_exp_logits), ("predicted_logits", predicted_logits)):
        if t.dtype != torch.float32:
            raise TypeError(f"{op}: '{name}' must be torch.float32, got {t.dtype}")
        _check_dim(op, name, t, 1)
        _check_length(op, name, t, bt, "BT (logits_max.size(0))")
        if t.device != logits_max.device:
            raise ValueError(f"{op}: '{name}' must be on the device of 'logits_max' "
                             f"({logits_max.device}), got {t.device}")
    _check_label_smoothing(op, label_smoothing)
    for name, t in (("input", input), ("weight", weight)):
        if t is not None:
            raise ValueError(f"{op}: '{name}' must be None (only None is supported, as on the "
                             f"NPU), got a tensor")
    if vocab_parallel_logits is not None:
        logits = vocab_parallel_logits
        if logits.dtype not in (torch.float32, *_HALF):
            raise TypeError(f"{op}: 'vocab_parallel_logits' must be torch.float32, torch.float16 "
                            f"or torch.bfloat16, got {logits.dtype}")
        _check_dim(op, "vocab_parallel_logits", logits, 2)
        _check_length(op, "vocab_parallel_logits", logits, bt, "BT (logits_max.size(0)) in dim 0")
        if logits.device != logits_max.device:
            raise ValueError(f"{op}: 'vocab_parallel_logits' must be on the device of "
                             f"'logits_max' ({logits_max.device}), got {logits.device}")


def batch_norm_reduce_output_dtype(input_dtype: torch.dtype, mean_dtype: torch.dtype) -> torch.dtype:
    """SPEC §2's dtype of the sums, as validation.cpp states it."""
    if input_dtype == torch.float64:
        return torch.float64
    return torch.float16 if input_dtype == mean_dtype == torch.float16 else torch.float32
