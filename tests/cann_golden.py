"""CANN's own golden rules for the four operators, restated in our words as a second
oracle, independent of python/ascend_ops/reference.py.

The reference is written from SPEC, and SPEC from CANN's doc pages; where a page and
CANN's kernel disagree (the FLCE forward's vocabulary end, the mask's padding bits), an
oracle written from the same reading would agree with a wrong implementation. These rules
are read from the tests CANN runs its kernels against (hicann/ops-nn, the ATK executors
and golden functions under each op's tests/), so a misreading of the docs cannot pass
both oracles:

  - FusedLinearOnlineMaxSum (matmul/fused_linear_online_max_sum/tests/st/.../
    executor_aclnnFusedLinearOnlineMaxSum.py, `ascend_fused_linear_online_max_sum`);
  - FusedCrossEntropyLossWithMaxSum (loss/fused_cross_entropy_loss_with_max_sum/tests/
    assets/golden.py);
  - FusedLinearCrossEntropyLossGrad (matmul/fused_linear_cross_entropy_loss_grad/tests/
    st/.../executor_aclnnFusedLinearCrossEntropyLossGrad.py);
  - BatchNormReduceBackward (norm/sync_batch_norm_backward_reduce/tests/st/.../
    executor_aclnnBatchNormReduceBackward.py).

Each function computes in float64 what CANN's golden computes, with CANN's conventions
for the integer outputs (exact), and notes where CANN's golden rounds differently.
"""

from __future__ import annotations

import torch


def online_max_sum(input, weight, target, vocab_start_index, vocab_end_index):
    """(logits_max, sum_exp_logits, predicted_logits, target_mask bytes, masked_target,
    logits), float64 except the mask (uint8) and masked_target (target's dtype).

    CANN's rules: logits = input @ weight.T; a row is masked when its target is below the
    start or at or above the END, which is exclusive; masked_target is the target minus
    the start, 0 where masked; predicted is the logit at masked_target minus the row max,
    0 where masked. The mask is the row bits packed eight to a byte, row 8k + j in bit j;
    the last byte's rows past BT are those of a target padded with id 0, masked by the
    same rule."""
    logits = input.double() @ weight.double().T  # BT x V
    logits_max = logits.amax(dim=1)
    shifted = logits - logits_max[:, None]
    sum_exp = shifted.exp().sum(dim=1)
    masked = (target < vocab_start_index) | (target >= vocab_end_index)
    masked_target = torch.where(masked, 0, target - vocab_start_index).to(target.dtype)
    rows = torch.arange(target.numel())
    predicted = torch.where(masked, 0.0, shifted[rows, masked_target.long()])
    padded_rows = -(-target.numel() // 8) * 8
    padded = torch.zeros(padded_rows, dtype=target.dtype)
    padded[: target.numel()] = target
    bits = ((padded < vocab_start_index) | (padded >= vocab_end_index)).view(-1, 8).long()
    mask = (bits << torch.arange(8)).sum(dim=1).to(torch.uint8)
    return logits_max, sum_exp, predicted, mask, masked_target, logits


def loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits, vocab_parallel_logits=None):
    """(loss, softmax or None), float64: loss = log(S) - predicted; the softmax is the
    kept logits shifted by the global max, times 1 / S (CANN multiplies by the
    reciprocal, as its kernel does)."""
    loss = sum_exp_logits.double().log() - predicted_logits.double()
    if vocab_parallel_logits is None:
        return loss, None
    inverse = 1.0 / sum_exp_logits.double()
    softmax = (vocab_parallel_logits.double() - logits_max.double()[:, None]).exp() * inverse[:, None]
    return loss, softmax


def flce_grad(grad, input, weight, target_mask_bool, masked_target, softmax):
    """(input_grad, weight_grad), float64, from the softmax of high-performance mode
    (memory-saving mode recomputes that softmax from the statistics first): subtract 1 at
    each unmasked row's target column, scale each row by its upstream gradient, then the
    two GEMMs, on that logits gradient rounded to the weight's dtype (as CANN's golden
    rounds it), in float64."""
    g = softmax.double().clone()  # BT x V
    rows = torch.arange(g.size(0))
    g[rows, masked_target.long()] -= (~target_mask_bool).double()
    g = (g * grad.double()[:, None]).to(weight.dtype).double()
    return g @ weight.double(), g.T @ input.double()


def memory_saving_softmax(input, weight, logits_max, sum_exp_logits):
    """The softmax memory-saving mode recomputes: exp(input @ weight.T - max) / S."""
    logits = input.double() @ weight.double().T
    return (logits - logits_max.double()[:, None]).exp() / sum_exp_logits.double()[:, None]


def batch_norm_reduce_backward(grad_out, input, mean, invstd):
    """(sum_dy, sum_dy_xmu, grad_weight, grad_bias), float64, per channel (dim 1):
    Σ dy, Σ dy·(x − mean), Σ dy·(x − mean)·invstd (x̂ formed first, as CANN's golden
    does), Σ dy. The weight does not enter."""
    dims = [d for d in range(input.dim()) if d != 1]
    shape = [1] * input.dim()
    shape[1] = input.size(1)
    centred = input.double() - mean.double().view(shape)
    x_hat = centred * invstd.double().view(shape)
    dy = grad_out.double()
    sum_dy = dy.sum(dims)
    return sum_dy, (dy * centred).sum(dims), (dy * x_hat).sum(dims), sum_dy.clone()
