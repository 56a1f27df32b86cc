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

One rule is read from CANN's host code instead, because there what CANN's kernel computes
departs from its golden: batch_norm_reduce_backward_composite, what the built-in
aclnnBatchNormReduceBackward computes in float32 (its golden is the float64 one below).
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


def _float32(x: torch.Tensor) -> torch.Tensor:
    """x rounded to float32 (one float32 operation's rounding), held in float64."""
    return x.float().double()


def batch_norm_reduce_backward_composite(grad_out, input, mean, invstd, out_dtype):
    """(outputs, bounds): what CANN's built-in aclnnBatchNormReduceBackward computes, in
    float32, and how far its result may still lie from these values, both per channel
    [C] for (sum_dy, sum_dy_xmu, grad_weight, grad_bias), in float64.

    CANN's rules (norm/sync_batch_norm_backward_reduce/op_host/op_api/
    aclnn_batch_norm_backward_reduce.cpp): every input cast to float32 (:298-307);
    Σ dy·x = ReduceSum(Mul(dy, x)) and Σ dy = ReduceSum(dy) over every dim but C
    (:375-394); then the SyncBatchNormBackwardReduce kernel (:427): sum_dy_xmu =
    Sub(Σ dy·x, Mul(mean, Σ dy)) and grad_weight = Mul(sum_dy_xmu, invstd); grad_bias is Σ
    dy (:352); each cast to the output dtype (:323). Σ dy·(x − mean) is thus formed as a
    difference of two sums that cancel when |mean| >> std: on bn_cases' mean_offset=1000
    case ([4, 6, 9, 9], unit spread) it is 1.2e-3 off float64 even rounded at its best,
    7e-5 of the largest output, where SPEC §4 allows 1e-5 of it (1.8e-4).

    Each float32 Mul, Sub and cast is rounded here as the NPU rounds it; the two
    ReduceSums are summed exactly (float64) and rounded once, the best a float32 reduction
    can do. `bounds` is the part the NPU's reduction order may add: a pairwise
    reduction of n terms is within (⌈log2 n⌉ + 1)·2^-24·Σ|terms| of the exact sum, carried
    through the Sub and Mul, plus a rounding of each float32 step and one unit in the last
    place of the output dtype.
    """
    dims = [d for d in range(input.dim()) if d != 1]
    shape = [1] * input.dim()
    shape[1] = input.size(1)
    n = max(input.numel() // max(input.size(1), 1), 1)
    u = 2.0**-24
    k = (max(n - 1, 1)).bit_length() + 1  # ⌈log2 n⌉ + 1
    dy = _float32(grad_out.double())
    x = _float32(input.double())
    m = _float32(mean.double())
    s = _float32(invstd.double())
    products = _float32(dy * x)                       # Mul, float32
    sum_dy_x = _float32(products.sum(dims))           # ReduceSum
    sum_dy = _float32(dy.sum(dims))                   # ReduceSum
    mean_sum_dy = _float32(m * sum_dy)                # Mul(mean, sumDy)
    sum_dy_xmu = _float32(sum_dy_x - mean_sum_dy)     # Sub
    grad_weight = _float32(sum_dy_xmu * s)            # Mul(sumDyXmu, invstd)
    out_ulp = 2.0**-10 if out_dtype == torch.float16 else u * 2

    def out(v):
        return v.to(out_dtype).double()

    def ulp(v):
        return out_ulp * v.abs()

    e_dy = k * u * dy.abs().sum(dims)
    e_dy_x = k * u * products.abs().sum(dims)
    e_xmu = e_dy_x + m.abs() * e_dy + u * (mean_sum_dy.abs() + sum_dy_xmu.abs())
    e_weight = e_xmu * s + u * grad_weight.abs()
    outputs = (out(sum_dy), out(sum_dy_xmu), out(grad_weight), out(sum_dy))
    bounds = (e_dy + ulp(sum_dy), e_xmu + ulp(sum_dy_xmu), e_weight + ulp(grad_weight),
              e_dy + ulp(sum_dy))
    return outputs, bounds


def composite_error(ours, outputs, bounds):
    """None when every output lies within its bound of the composite's, else a message
    naming the worst element of the first output that does not."""
    for i, (o, want, bound) in enumerate(zip(ours, outputs, bounds)):
        error = (o.double() - want).abs()
        excess = error - bound
        if bool((excess > 0).any()):
            c = int(excess.argmax())
            return (f"output {i} channel {c}: ours {o.flatten()[c].item():.9g}, CANN's "
                    f"composite {want[c].item():.9g}, bound {bound[c].item():.3g}")
    return None
