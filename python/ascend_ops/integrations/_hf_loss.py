"""A causal LM's loss from its final hidden states and head weight, as Transformers'
ForCausalLMLoss computes it from the logits, without building the logits:

    shift = cat(labels[..., 1:], ignore_index)              # B x T: token t predicts t + 1
    loss  = F.cross_entropy((scale * hidden @ W.T).float(), shift,
                            ignore_index=ignore_index,
                            reduction="sum" if num_items_in_batch else "mean")
    loss  = loss / num_items_in_batch                        # when given (Trainer's accumulation)
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..distributed import all_reduce_grad
from ..vocab_parallel import linear_cross_entropy

_HALF = (torch.float16, torch.bfloat16)


def shifted_labels(labels: torch.Tensor, ignore_index: int) -> torch.Tensor:
    """labels [B, T] → [B, T] whose row t is labels[t + 1], the last `ignore_index`."""
    return torch.nn.functional.pad(labels[..., 1:], (0, 1), value=ignore_index)


def head_dtype(hidden: torch.Tensor, weight: torch.Tensor,
               compute_dtype: torch.dtype | None) -> torch.dtype:
    """The half dtype the head runs in: the one asked for; else autocast's where it is on
    (Transformers' own head would run in it too); else the weight's if half; else
    bfloat16 (linear_cross_entropy computes in float16 or bfloat16 only)."""
    if compute_dtype is not None:
        return compute_dtype
    device_type = hidden.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return weight.dtype if weight.dtype in _HALF else torch.bfloat16


def causal_lm_loss(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor | None,
    *,
    shift_labels: torch.Tensor | None = None,
    ignore_index: int = -100,
    num_items_in_batch: torch.Tensor | int | None = None,
    logit_scale: float = 1.0,
    compute_dtype: torch.dtype | None = None,
    process_group: dist.ProcessGroup | None = None,
    vocab_start_index: int | None = None,
    mode: str = "memory-saving",
) -> torch.Tensor:
    """The loss above, float32. `hidden` [B, T, H] (as the head received it), `weight`
    [V, H] the head's weight (this rank's shard with `process_group`); `shift_labels`, when
    given, is used as it is (Transformers' convention for pre-shifted labels)."""
    if shift_labels is None:
        shift_labels = shifted_labels(labels, ignore_index)
    shift_labels = shift_labels.to(hidden.device)
    if tuple(shift_labels.shape) != tuple(hidden.shape[:-1]):
        raise ValueError(
            f"ascend_ops.integrations.transformers: 'labels' must have the shape of the "
            f"positions the head sees {tuple(hidden.shape[:-1])}, got "
            f"{tuple(shift_labels.shape)} (logits_to_keep cannot be combined with labels)")
    dtype = head_dtype(hidden, weight, compute_dtype)
    # The gradient of hidden is this shard's part; the layers below need the sum.
    hidden = all_reduce_grad(hidden, process_group)
    with torch.autocast(hidden.device.type, enabled=False):
        x = hidden.to(dtype)
        if logit_scale != 1.0:
            x = x * logit_scale  # (s·x) @ W.T == s·(x @ W.T)
        reduction = "mean" if num_items_in_batch is None else "sum"
        loss = linear_cross_entropy(
            x, weight.to(dtype), shift_labels, ignore_index=ignore_index, reduction=reduction,
            process_group=process_group, vocab_start_index=vocab_start_index, mode=mode)
    if num_items_in_batch is not None:
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss
