"""A causal LM's loss from its final hidden states and head, as Transformers'
ForCausalLMLoss (or Trainer's LabelSmoother) computes it from the logits, without building
the logits:

    logits = transform(hidden @ W.T + b)                     # the model's scale / soft-cap
    shift = cat(labels[..., 1:], ignore_index)              # B x T: token t predicts t + 1
    loss  = F.cross_entropy(logits.float(), shift, ignore_index=ignore_index,
                            label_smoothing=eps,
                            reduction="sum" if num_items_in_batch else "mean")
    loss  = loss / num_items_in_batch                        # when given (Trainer's accumulation)
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..distributed import all_reduce_grad
from ..lce import linear_cross_entropy
from ..lce.float32 import linear_cross_entropy_float32

_HALF = (torch.float16, torch.bfloat16)
_NAME = "ascend_ops.integrations.transformers"


class LabelsDtypeError(TypeError, RuntimeError):
    """A TypeError, and the RuntimeError Transformers' own loss raises for such labels."""


def check_labels(labels, shift_labels=None) -> None:
    """Labels as Transformers' loss takes them: int64 tensors (its F.cross_entropy refuses
    float, bool and int32 targets with "expected target dtype to be Long")."""
    for name, t in (("labels", labels), ("shift_labels", shift_labels)):
        if t is None:
            continue
        if not torch.is_tensor(t):
            raise TypeError(f"{_NAME}: '{name}' must be a torch.int64 tensor, got "
                            f"{type(t).__name__}")
        if t.dtype != torch.int64:
            raise LabelsDtypeError(
                f"{_NAME}: '{name}' must be torch.int64 (expected target dtype to be Long, as "
                f"Transformers' loss says), got {t.dtype}")


def shifted_labels(labels: torch.Tensor, ignore_index: int) -> torch.Tensor:
    """labels [B, T] → [B, T] whose row t is labels[t + 1], the last `ignore_index`."""
    return torch.nn.functional.pad(labels[..., 1:], (0, 1), value=ignore_index)


def head_dtype(device_type: str, weight_dtype: torch.dtype,
               compute_dtype: torch.dtype | None) -> torch.dtype:
    """The dtype the head runs in: the one asked for; else autocast's where it is on
    (Transformers' own head would run in it too); else the weight's. float32 runs in
    float32 on CPU (linear_cross_entropy_float32, or with options linear_cross_entropy's
    float32 kernels); elsewhere the fused kernels, like
    CANN's, take float16 and bfloat16 only, so a float32 head is refused there rather than
    rounded behind the user's back."""
    if compute_dtype is None:
        if torch.is_autocast_enabled(device_type):
            compute_dtype = torch.get_autocast_dtype(device_type)
        else:
            compute_dtype = weight_dtype if weight_dtype in _HALF else torch.float32
    if compute_dtype == torch.float32 and device_type != "cpu":
        raise TypeError(
            f"{_NAME}: a float32 head on {device_type}: the fused kernels there take float16 "
            f"or bfloat16 only; pass apply(model, compute_dtype=torch.bfloat16) to run the "
            f"loss's head in bfloat16, or train under autocast")
    return compute_dtype


def causal_lm_loss(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor | None,
    *,
    linear_bias: torch.Tensor | None = None,
    label_smoothing: float = 0.0,
    logit_scale: float = 1.0,
    softcap: float | None = None,
    shift_labels: torch.Tensor | None = None,
    ignore_index: int = -100,
    num_items_in_batch: torch.Tensor | int | None = None,
    compute_dtype: torch.dtype | None = None,
    process_group: dist.ProcessGroup | None = None,
    vocab_start_index: int | None = None,
    mode: str = "memory-saving",
) -> torch.Tensor:
    """The loss above, float32. `hidden` [B, T, H]: the head's input; `weight` [V, H] and
    `linear_bias` [V] the head's (this rank's shard with `process_group`); `logit_scale`
    and `softcap` the model's transform of its logits; `shift_labels`, when given, is used
    as it is (Transformers' convention for pre-shifted labels)."""
    if shift_labels is None:
        shift_labels = shifted_labels(labels, ignore_index)
    shift_labels = shift_labels.to(hidden.device)
    if tuple(shift_labels.shape) != tuple(hidden.shape[:-1]):
        raise ValueError(
            f"{_NAME}: 'labels' must have the shape of the positions the head sees "
            f"{tuple(hidden.shape[:-1])}, got {tuple(shift_labels.shape)} (Transformers: "
            f"Expected input batch_size ({hidden.shape[:-1].numel()}) to match target "
            f"batch_size ({shift_labels.numel()}); logits_to_keep cannot be combined with "
            f"labels)")
    dtype = head_dtype(hidden.device.type, weight.dtype, compute_dtype)
    # The gradient of hidden is this shard's part; the layers below need the sum.
    hidden = all_reduce_grad(hidden, process_group)
    plain = (linear_bias is None and label_smoothing == 0.0 and logit_scale == 1.0
             and softcap is None)
    with torch.autocast(hidden.device.type, enabled=False):
        reduction = "mean" if num_items_in_batch is None else "sum"
        if dtype == torch.float32 and plain:  # plain torch, which torch.compile traces whole
            loss = linear_cross_entropy_float32(
                hidden.float(), weight.float(), shift_labels, ignore_index=ignore_index,
                reduction=reduction, process_group=process_group,
                vocab_start_index=vocab_start_index)
        else:
            # rows flattened here, so that linear_cross_entropy's input is no view it makes
            loss = linear_cross_entropy(
                hidden.to(dtype).reshape(-1, hidden.size(-1)), weight.to(dtype),
                shift_labels.reshape(-1),
                linear_bias=None if linear_bias is None else linear_bias.to(dtype),
                ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing,
                logit_scale=logit_scale, softcap=softcap, process_group=process_group,
                vocab_start_index=vocab_start_index, mode=mode)
    if num_items_in_batch is not None:
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss
