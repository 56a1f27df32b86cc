"""The reference: SPEC's formulas in plain torch, the oracle every implementation is
compared with. It does no validation (the public API validates before calling it) and
accepts any floating dtype, so tests can also run it in float64 against autograd.

`compute_dtype=None` is what `impl="reference"` runs: float32 arithmetic, outputs in
SPEC's dtypes. With a dtype (torch.float64 for the oracle) every step runs in that dtype,
except SPEC's cast of the logits gradient to input's dtype, and the outputs stay in it.
"""

from __future__ import annotations

import torch

from .masks import pack_target_mask, padding_masked, unpack_target_mask

__all__ = ["fused_linear_cross_entropy_loss_grad", "batch_norm_reduce_backward",
           "batch_norm_reduce_output_dtype", "fused_linear_online_max_sum",
           "fused_cross_entropy_loss_with_max_sum"]


def fused_linear_cross_entropy_loss_grad(
    grad: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    target_mask: torch.Tensor,
    masked_target: torch.Tensor,
    label_smoothing: float = 0.0,
    logits_max: torch.Tensor | None = None,
    sum_exp_logits: torch.Tensor | None = None,
    softmax: torch.Tensor | None = None,
    *,
    compute_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SPEC §1: (input_grad, weight_grad) of vocab-parallel cross entropy over input @ weight.T."""
    ct = compute_dtype or torch.float32
    if softmax is not None:  # high-performance mode (copied: the caller's softmax is not written)
        p = softmax.to(ct, copy=True)
    else:  # memory-saving mode
        logits = input.to(ct) @ weight.to(ct).T
        p = torch.exp(logits - logits_max.to(ct)[:, None]) / sum_exp_logits.to(ct)[:, None]
    rows = torch.nonzero(~unpack_target_mask(target_mask, input.size(0))).squeeze(1)
    p[rows, masked_target[rows].long()] -= 1
    g = (p * grad.to(ct)[:, None]).to(input.dtype).to(ct)  # the NPU casts here, before the GEMMs
    input_grad = g @ weight.to(ct)
    weight_grad = g.T @ input.to(ct)
    out = input.dtype if compute_dtype is None else ct
    return input_grad.to(out), weight_grad.to(out)


def batch_norm_reduce_output_dtype(input_dtype: torch.dtype, mean_dtype: torch.dtype) -> torch.dtype:
    """SPEC §2's dtype of the sums: float64 for a float64 input, else float16 when input and
    mean are both float16, else float32. The rule lives in C++ (validation.cpp), stated
    again in Python for when `_C` cannot load (`_validation.py`, tested to agree)."""
    from ._extension import checks

    return checks().batch_norm_reduce_output_dtype(input_dtype, mean_dtype)


def batch_norm_reduce_backward(
    grad_out: torch.Tensor,
    input: torch.Tensor,
    mean: torch.Tensor,
    invstd: torch.Tensor,
    weight: torch.Tensor | None,
    input_g: bool,
    weight_g: bool,
    bias_g: bool,
    *,
    compute_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor | None, ...]:
    """SPEC §2: per-channel Σ dy, Σ dy·(x − mean), their grad_weight and grad_bias."""
    ct = compute_dtype or torch.float32
    dims = [d for d in range(input.dim()) if d != 1]
    per_channel = [1, -1] + [1] * (input.dim() - 2)
    dy = grad_out.to(ct)
    sum_dy = dy.sum(dims)
    sum_dy_xmu = (dy * (input.to(ct) - mean.to(ct).view(per_channel))).sum(dims)
    grad_weight = sum_dy_xmu * invstd.to(ct)
    out = batch_norm_reduce_output_dtype(input.dtype, mean.dtype) if compute_dtype is None else ct
    return (
        sum_dy.to(out) if input_g else None,
        sum_dy_xmu.to(out) if input_g else None,
        grad_weight.to(out) if weight_g else None,
        sum_dy.to(out) if bias_g else None,
    )


def fused_linear_online_max_sum(
    input: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    vocab_start_index: int,
    vocab_end_index: int,
    return_logits: bool = False,
    *,
    compute_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, ...]:
    """SPEC §3: this shard's row max, Σ exp(logit − max) and target logit − max, the
    bit-packed target mask, the local targets and (return_logits) the logits."""
    ct = compute_dtype or torch.float32
    logits = input.to(ct) @ weight.to(ct).T  # BT x V
    if logits.size(1):
        logits_max = logits.amax(dim=1)
    else:  # an empty shard: the max of nothing, so that it loses every all-reduce max
        logits_max = torch.full((logits.size(0),), -torch.inf, dtype=ct, device=logits.device)
    sum_exp_logits = torch.exp(logits - logits_max[:, None]).sum(dim=1)
    # In int64: a Python int past int32's range compared with an int32 tensor wraps (a start
    # of 2**32 + 1 would act as 1), where SPEC compares the ids as integers.
    ids = target.long()
    masked = (ids < vocab_start_index) | (ids >= vocab_end_index)
    masked_target = torch.where(masked, 0, ids - vocab_start_index).to(target.dtype)
    rows = torch.arange(target.size(0), device=target.device)
    picked = logits[rows, masked_target.long()] if logits.size(1) else torch.zeros_like(logits_max)
    predicted_logits = torch.where(masked, 0, picked - logits_max)
    stats = logits_max, sum_exp_logits, predicted_logits
    if compute_dtype is None:
        stats = tuple(s.float() for s in stats)
    vocab_parallel_logits = logits.to(input.dtype) if return_logits else input.new_empty(0)
    if return_logits and compute_dtype is not None:
        vocab_parallel_logits = logits  # the oracle keeps them unrounded
    target_mask = pack_target_mask(masked, padding_masked(vocab_start_index, vocab_end_index))
    return (*stats, target_mask, masked_target, vocab_parallel_logits)


def fused_cross_entropy_loss_with_max_sum(
    logits_max: torch.Tensor,
    sum_exp_logits: torch.Tensor,
    predicted_logits: torch.Tensor,
    *,
    label_smoothing: float = 0.0,
    input: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
    vocab_parallel_logits: torch.Tensor | None = None,
    compute_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SPEC §3: loss = log(S) − predicted from the global statistics, and the softmax of
    the kept logits."""
    ct = compute_dtype or torch.float32
    loss = torch.log(sum_exp_logits.to(ct)) - predicted_logits.to(ct)
    if vocab_parallel_logits is None:
        softmax = logits_max.new_empty(0, dtype=ct)
    else:
        softmax = (torch.exp(vocab_parallel_logits.to(ct) - logits_max.to(ct)[:, None])
                   / sum_exp_logits.to(ct)[:, None])
    return loss, softmax
