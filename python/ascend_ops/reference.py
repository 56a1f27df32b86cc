"""The reference: SPEC's formulas in plain torch, the oracle every implementation is
compared with. It does no validation (the public API validates before calling it) and
accepts any floating dtype, so tests can also run it in float64 against autograd.

`compute_dtype=None` is what `impl="reference"` runs: float32 arithmetic, outputs in
SPEC's dtypes. With a dtype (torch.float64 for the oracle) every step runs in that dtype,
except SPEC's cast of the logits gradient to input's dtype, and the outputs stay in it.
"""

from __future__ import annotations

import torch

from .masks import unpack_target_mask

__all__ = ["fused_linear_cross_entropy_loss_grad", "batch_norm_reduce_backward",
           "batch_norm_reduce_output_dtype"]


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
    """float16 when input and mean are both float16, else float32 (torch_npu's rule)."""
    both_half = input_dtype == torch.float16 and mean_dtype == torch.float16
    return torch.float16 if both_half else torch.float32


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
