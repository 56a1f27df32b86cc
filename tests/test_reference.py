"""The reference against autograd of plain torch: the oracle must itself be right."""

import pytest
import torch
import torch.nn.functional as F

from ascend_ops import pack_target_mask, reference

F64 = torch.float64


@pytest.mark.parametrize("shards", [1, 3])
@pytest.mark.parametrize("mode", ["memory-saving", "high-performance"])
def test_flce_reference_is_the_gradient_of_cross_entropy(shards, mode):
    gen = torch.Generator().manual_seed(shards)
    bt, h, v_shard = 23, 17, 29
    x = torch.randn(bt, h, generator=gen, dtype=F64, requires_grad=True)
    w = torch.randn(shards * v_shard, h, generator=gen, dtype=F64, requires_grad=True)
    target = torch.randint(0, shards * v_shard, (bt,), generator=gen)
    grad = torch.rand(bt, generator=gen, dtype=F64)
    F.cross_entropy(x @ w.T, target, reduction="none").backward(grad)

    logits = (x @ w.T).detach()
    logits_max = logits.amax(dim=1)
    sum_exp = torch.exp(logits - logits_max[:, None]).sum(dim=1)
    input_grad = torch.zeros_like(x)
    weight_grads = []
    for rank in range(shards):
        start, end = rank * v_shard, (rank + 1) * v_shard
        masked = (target < start) | (target >= end)
        masked_target = torch.where(masked, 0, target - start)
        softmax = None
        if mode == "high-performance":
            softmax = torch.exp(logits[:, start:end] - logits_max[:, None]) / sum_exp[:, None]
        ig, wg = reference.fused_linear_cross_entropy_loss_grad(
            grad, x.detach(), w[start:end].detach(), pack_target_mask(masked), masked_target,
            0.0, logits_max, sum_exp, softmax, compute_dtype=F64)
        input_grad += ig
        weight_grads.append(wg)
    torch.testing.assert_close(input_grad, x.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(torch.cat(weight_grads), w.grad, rtol=1e-12, atol=1e-12)


def test_flce_reference_leaves_the_callers_softmax_alone():
    softmax = torch.rand(4, 6)
    before = softmax.clone()
    reference.fused_linear_cross_entropy_loss_grad(
        torch.ones(4), torch.randn(4, 3).bfloat16(), torch.randn(6, 3).bfloat16(),
        torch.zeros(4, dtype=torch.bool), torch.arange(4), softmax=softmax)
    assert torch.equal(softmax, before)


@pytest.mark.parametrize("shape", [(7, 3), (4, 5, 6), (3, 4, 5, 6), (2, 3, 4, 3, 2)])
def test_bn_reference_is_what_batch_norm_backward_needs(shape):
    gen = torch.Generator().manual_seed(len(shape))
    c, eps = shape[1], 1e-5
    x = torch.randn(shape, generator=gen, dtype=F64, requires_grad=True)
    weight = torch.rand(c, generator=gen, dtype=F64, requires_grad=True)
    bias = torch.rand(c, generator=gen, dtype=F64, requires_grad=True)
    dy = torch.randn(shape, generator=gen, dtype=F64)
    F.batch_norm(x, None, None, weight, bias, training=True, eps=eps).backward(dy)

    dims = [d for d in range(x.dim()) if d != 1]
    per_channel = [1, c] + [1] * (x.dim() - 2)
    mean = x.detach().mean(dims)
    invstd = (x.detach().var(dims, unbiased=False) + eps).rsqrt()
    sum_dy, sum_dy_xmu, grad_weight, grad_bias = reference.batch_norm_reduce_backward(
        dy, x.detach(), mean, invstd, weight.detach(), True, True, True, compute_dtype=F64)
    torch.testing.assert_close(grad_weight, weight.grad)
    torch.testing.assert_close(grad_bias, bias.grad)
    # The element-wise second half of the backward, fed by the two sums.
    n = x.numel() // c
    xmu = x.detach() - mean.view(per_channel)
    dx = (dy - (sum_dy / n).view(per_channel)
          - xmu * (invstd**2 * sum_dy_xmu / n).view(per_channel)) * (invstd * weight.detach()).view(per_channel)
    torch.testing.assert_close(dx, x.grad)


@pytest.mark.parametrize("input_dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mean_dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_bn_output_dtype_rule(input_dtype, mean_dtype):
    expected = torch.float16 if (input_dtype, mean_dtype) == (torch.float16, torch.float16) else torch.float32
    assert reference.batch_norm_reduce_output_dtype(input_dtype, mean_dtype) == expected
    # float64 (aten's CPU registration): float64 sums whatever mean's dtype
    assert reference.batch_norm_reduce_output_dtype(torch.float64, mean_dtype) == torch.float64
