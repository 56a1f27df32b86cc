"""The blocks linear_cross_entropy's CPU step keeps from one step to the next
(op_plugin/csrc/cpu/gemm/operands/kept_scratch.{h,cpp}, python/ascend_ops/training/lce/grad_cache.py): a
block is handed out again once its tensor is gone, never while it lives, never above what
the caller allows to be kept, poisoned each time under ASCEND_OPS_CPU_POISON_SCRATCH=1, and
freed on request; the logits chunk's block serves the weight gradient; a step's gradients
do not change with it."""

import gc

import pytest
import torch

import ascend_ops
from ascend_ops import _C
from ascend_ops.training.lce import grad_cache as _grad_cache
from test_grad_cache import problem, run

MIB = 1 << 20


@pytest.fixture(autouse=True)
def nothing_kept():
    gc.collect()
    _C.cpu_release_kept_scratch()
    assert _C.cpu_kept_scratch_bytes() == 0
    yield
    gc.collect()
    _C.cpu_release_kept_scratch()


def kept(sizes, role="lce_logits", dtype=torch.float32, keep_at_most=MIB):
    return _C.cpu_kept_scratch_empty(role, sizes, dtype, keep_at_most)


def test_a_block_is_handed_out_again_once_its_tensor_is_gone():
    first = kept([16, 100])
    address = first.data_ptr()
    assert first.shape == (16, 100) and first.dtype == torch.float32 and first.is_contiguous()
    held = _C.cpu_kept_scratch_bytes()
    assert 16 * 100 * 4 <= held <= 16 * 100 * 4 * 9 // 8 + 64  # an eighth more, at most
    del first
    again = kept([10, 100])  # smaller: the same block
    assert again.data_ptr() == address and _C.cpu_kept_scratch_bytes() == held


def test_a_block_in_use_is_never_handed_out_twice():
    first = kept([16, 100])
    first.fill_(1.0)
    second = kept([16, 100])
    assert second.data_ptr() != first.data_ptr()
    second.fill_(2.0)
    assert torch.equal(first, torch.ones(16, 100))
    del second  # memory of its own: the slot still belongs to `first`
    third = kept([16, 100])
    assert third.data_ptr() != first.data_ptr()


def test_a_kept_tensor_resizes_as_an_ordinary_one():
    # the weight gradient is the caller's tensor: a resize past its block moves it elsewhere
    first = kept([4, 4])
    first.fill_(5.0)
    address = first.data_ptr()
    first.resize_(64, 64)
    assert first.data_ptr() != address and torch.equal(first.view(-1)[:16], torch.full((16,), 5.0))
    assert kept([4, 4]).data_ptr() == address  # its block came back


def test_the_cache_and_the_logits_keep_blocks_of_their_own():
    logits = kept([8, 8])
    cache = kept([8, 8], role="lce_grad_cache", dtype=torch.bfloat16)
    assert logits.data_ptr() != cache.data_ptr()
    assert _C.cpu_kept_scratch_bytes() >= 8 * 8 * 4 + 8 * 8 * 2


def test_a_request_above_the_cap_is_not_kept():
    big = kept([64, 1024], keep_at_most=64 * 1024 * 4 - 1)
    assert big.shape == (64, 1024) and _C.cpu_kept_scratch_bytes() == 0
    del big
    assert _C.cpu_kept_scratch_bytes() == 0


def test_a_larger_request_grows_the_block_within_the_cap():
    small = kept([4, 100])
    del small
    large = kept([40, 100], keep_at_most=40 * 100 * 4)  # no eighth more room under this cap
    assert _C.cpu_kept_scratch_bytes() == 40 * 100 * 4
    large.fill_(3.0)
    assert torch.equal(large, torch.full((40, 100), 3.0))


def test_poisoned_each_time_it_is_handed_out(monkeypatch):
    monkeypatch.setenv("ASCEND_OPS_CPU_POISON_SCRATCH", "1")
    first = kept([5, 7], role="lce_grad_cache", dtype=torch.bfloat16)
    assert first.isnan().all()
    first.zero_()
    address = first.data_ptr()
    del first
    again = kept([5, 7], role="lce_grad_cache", dtype=torch.bfloat16)
    assert again.data_ptr() == address and again.isnan().all()


def test_release_frees_free_blocks_now_and_blocks_in_use_when_their_tensor_dies():
    free = kept([100, 100])
    del free
    in_use = kept([50, 50], role="lce_grad_cache", dtype=torch.bfloat16)
    in_use.fill_(1.0)
    _C.cpu_release_kept_scratch()
    assert _C.cpu_kept_scratch_bytes() >= 50 * 50 * 2  # the block in use only
    assert _C.cpu_kept_scratch_bytes() < 100 * 100 * 4
    assert torch.equal(in_use, torch.ones(50, 50, dtype=torch.bfloat16))  # still valid
    del in_use
    assert _C.cpu_kept_scratch_bytes() == 0


def test_empty_request_keeps_nothing():
    assert kept([0, 100]).shape == (0, 100) and _C.cpu_kept_scratch_bytes() == 0


@pytest.mark.parametrize("role", ["logits", "", "lce_grad_cache "])
def test_unknown_role_is_refused(role):
    with pytest.raises(ValueError, match=f"role must be 'lce_grad_cache' or 'lce_logits', got '{role}'"):
        kept([2, 2], role=role)


def test_training_steps_reuse_the_blocks_and_give_the_same_gradients():
    input, weight, target = problem(bt=64, h=24, v=300, seed=3)
    first = run(input, weight, target)
    assert first[3]  # the cache was taken
    held = _C.cpu_kept_scratch_bytes()
    assert held >= 64 * _C.cpu_scratch_ld(300) * 2 + 64 * 300 * 4  # G, the logits chunk
    second = run(input, weight, target)
    assert _C.cpu_kept_scratch_bytes() == held
    assert all(torch.equal(a, b) for a, b in zip(first[:3], second[:3]))


def test_two_forwards_before_one_backward_give_each_its_own_gradient():
    # Gradient accumulation over two micro-batches in one graph: the second forward finds the
    # kept blocks taken by the first and gets memory of its own.
    a_in, weight, a_target = problem(bt=40, h=16, v=200, seed=4)
    b_in, _, b_target = problem(bt=40, h=16, v=200, seed=5)
    w = weight.clone().requires_grad_()
    xa, xb = a_in.clone().requires_grad_(), b_in.clone().requires_grad_()
    loss_a = ascend_ops.linear_cross_entropy(xa, w, a_target)
    loss_b = ascend_ops.linear_cross_entropy(xb, w, b_target)
    assert loss_a.grad_fn.saved.grad_cached and loss_b.grad_fn.saved.grad_cached
    (loss_a + loss_b).backward()
    alone_a, alone_b = run(a_in, weight, a_target), run(b_in, weight, b_target)
    assert torch.equal(xa.grad, alone_a[1]) and torch.equal(xb.grad, alone_b[1])
    torch.testing.assert_close(w.grad.float(), (alone_a[2].float() + alone_b[2].float()),
                               rtol=0, atol=2 ** -8 * w.grad.float().abs().max().item())


def test_the_gradient_cache_is_kept_within_the_budget_only(monkeypatch):
    input, weight, target = problem(bt=1024, h=8, v=600)  # G: 1024 x 608 bf16 = 1.19 MiB
    cache_bytes = 1024 * _C.cpu_scratch_ld(600) * 2
    logits_most = 1024 * 600 * 4 * 9 // 8 + 64  # one chunk of all rows, an eighth more
    weight_grad_most = 600 * 8 * 2 * 9 // 8 + 64
    monkeypatch.setenv(_grad_cache.GRAD_CACHE_ENV, "2")
    run(input, weight, target)
    assert _C.cpu_kept_scratch_bytes() >= cache_bytes + 1024 * 600 * 4
    _C.cpu_release_kept_scratch()
    # high-performance mode caches G over the budget, in memory of the step's own
    monkeypatch.setenv(_grad_cache.GRAD_CACHE_ENV, "1")
    assert run(input, weight, target, mode="high-performance")[3]
    assert 0 < _C.cpu_kept_scratch_bytes() <= logits_most + weight_grad_most


def weight_grad_of_a_step(input, weight, target):
    w = weight.clone().requires_grad_()
    ascend_ops.linear_cross_entropy(input.clone().requires_grad_(), w, target).backward()
    return w.grad


def test_the_weight_gradient_block_comes_back_once_the_caller_drops_it():
    input, weight, target = problem(bt=48, h=32, v=256, seed=6)
    first = weight_grad_of_a_step(input, weight, target)
    address, expected = first.data_ptr(), first.clone()
    # held by the caller: the next step's gradient is written elsewhere, this one untouched
    held = weight_grad_of_a_step(input, weight, target + 0)
    assert held.data_ptr() != address and torch.equal(first, expected)
    assert torch.equal(held, expected)
    del first, held  # as optimizer.zero_grad() does
    again = weight_grad_of_a_step(input, weight, target)
    assert again.data_ptr() == address and torch.equal(again, expected)


def test_the_logits_chunk_block_serves_the_weight_gradient():
    # the chunk (16 x 300 fp32, 19 KiB) is dead before the backward, whose weight gradient
    # (300 x 512 bf16, 300 KiB) grows the same block: kept is G and the larger of the two
    input, weight, target = problem(bt=16, h=512, v=300, seed=9)
    weight_grad_of_a_step(input, weight, target)
    cache_bytes, weight_grad_bytes = 16 * _C.cpu_scratch_ld(300) * 2, 300 * 512 * 2
    assert _C.cpu_kept_scratch_bytes() <= (cache_bytes + weight_grad_bytes) * 9 // 8 + 128


def test_the_weight_gradient_is_kept_within_the_budget_only(monkeypatch):
    input, weight, target = problem(bt=48, h=64, v=1000, seed=7)  # V x H bf16: 125 KiB
    monkeypatch.setenv(_grad_cache.GRAD_CACHE_ENV, "1")
    first = weight_grad_of_a_step(input, weight, target)
    address = first.data_ptr()
    del first
    assert weight_grad_of_a_step(input, weight, target).data_ptr() == address
    # G (48 x 1120 bf16, 105 KiB) within the budget, the weight gradient (2.1 MiB) over it
    big_weight = problem(bt=48, h=1024, v=1100, seed=7)[1]
    big_input, _, big_target = problem(bt=48, h=1024, v=1100, seed=8)
    before = _C.cpu_kept_scratch_bytes()
    assert run(big_input, big_weight, big_target)[3]
    assert _C.cpu_kept_scratch_bytes() - before < 1100 * 1024 * 2
