"""linear_cross_entropy on CPU gathers the rows not ignored (training/lce/kept_rows.py): the
decision (threshold, accelerators, process groups), and the results against float64
autograd of plain torch with the gathering forced (the multi-rank runs: test_distributed.py)."""

import pytest
import torch

import ascend_ops
from ascend_ops.training.lce import kept_rows
from ascend_ops.training.lce import HIGH_PERFORMANCE, MEMORY_SAVING
from test_linear_cross_entropy import assert_grad_close, problem, run, truth


def ignored_rows(bt, dropped):
    ignored = torch.zeros(bt, dtype=torch.bool)
    ignored[torch.randperm(bt, generator=torch.Generator().manual_seed(0))[:dropped]] = True
    return ignored


@pytest.mark.parametrize("bt, dropped, vocab, gathers", [
    (700, 11, 4096, True),    # 11·4096 >= 64·700
    (700, 10, 4096, False),   # 10·4096 <  64·700: the copy would cost more than it saves
    (700, 0, 4096, False),    # nothing to drop
    (700, 700, 4096, False),  # every row ignored: run them (the loss is NaN as torch's)
    (0, 0, 4096, False),      # empty batch
])
def test_gathers_where_the_saved_work_outweighs_the_copy(bt, dropped, vocab, gathers):
    ignored = ignored_rows(bt, dropped)
    index = kept_rows.kept_row_index(ignored, vocab, None)
    assert (index is not None) == gathers
    if gathers:
        assert torch.equal(index, (~ignored).nonzero().squeeze(1))


def test_no_gathering_off_cpu():
    # a meta tensor stands in for an accelerator: its targets cannot be read on the host
    ignored = ignored_rows(64, 32).to("meta")
    assert kept_rows.kept_row_index(ignored, 10**6, None) is None


@pytest.mark.parametrize("others, gathers", [
    ([(1, 32, -32)], True),    # the other rank agrees
    ([(0, 32, -32)], False),   # the other rank finds it not worth it
    ([(1, 31, -31)], False),   # the other rank drops another count: run every row
])
def test_every_rank_of_a_group_takes_one_decision(monkeypatch, others, gathers):
    calls = []

    def all_reduce(tensor, op, group):  # MIN over this rank's plan and the others'
        calls.append((op, tensor.dtype, tensor.device.type))
        for other in others:
            tensor.copy_(torch.minimum(tensor, torch.tensor(other)))

    monkeypatch.setattr(kept_rows.dist, "all_reduce", all_reduce)
    index = kept_rows.kept_row_index(ignored_rows(64, 32), 10**4, group=object())
    assert (index is not None) == gathers
    assert calls == [(kept_rows.dist.ReduceOp.MIN, torch.int64, "cpu")]


def test_gather_and_scatter():
    rows = torch.arange(12.0).view(6, 2)
    index = torch.tensor([0, 3, 4])
    kept = kept_rows.gather(rows, index)
    assert torch.equal(kept, rows[[0, 3, 4]])
    full = kept_rows.scatter(kept, index, 6)
    assert torch.equal(full[[0, 3, 4]], kept) and not full[[1, 2, 5]].any()
    assert kept_rows.gather(rows, None) is rows and kept_rows.scatter(rows, None, 6) is rows


def run_gathered(input, weight, target, grad, monkeypatch, **options):
    """test_linear_cross_entropy.run with the kept rows gathered whatever the size (and
    checked to have been)."""
    monkeypatch.setattr(kept_rows, "MIN_IGNORED_VOCAB_PER_ROW", 0)
    decide, decisions = kept_rows.kept_row_index, []

    def recorded(*args):
        decisions.append(decide(*args))
        return decisions[-1]

    monkeypatch.setattr(kept_rows, "kept_row_index", recorded)
    result = run(input, weight, target, grad, **options)
    assert len(decisions) == 1 and decisions[0] is not None
    return result


@pytest.mark.parametrize("grad_cache_mib", [None, "0"], ids=["cache-default", "cache-off"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("mode", [MEMORY_SAVING, HIGH_PERFORMANCE])
def test_gathered_rows_match_cross_entropy_autograd(mode, reduction, dtype, grad_cache_mib,
                                                    monkeypatch):
    if grad_cache_mib is None:
        monkeypatch.delenv("ASCEND_OPS_LCE_GRAD_CACHE_MIB", raising=False)
    else:
        monkeypatch.setenv("ASCEND_OPS_LCE_GRAD_CACHE_MIB", grad_cache_mib)
    input, weight, target = problem(lead=(5, 13), dtype=dtype, seed=7)
    target[1:3, 2:9] = -100  # ignored rows in runs and alone, first row kept, last ignored
    target[4, 12] = -100
    grad = torch.rand(target.shape) if reduction == "none" else None
    loss, input_grad, weight_grad = run_gathered(input, weight, target, grad, monkeypatch,
                                                 reduction=reduction, mode=mode)
    expected = truth(input, weight, target, reduction, grad=grad)
    assert loss.shape == expected[0].shape and input_grad.shape == input.shape
    torch.testing.assert_close(loss.double(), expected[0], rtol=1e-5, atol=1e-5)
    assert_grad_close(input_grad, expected[1], "input grad")
    assert_grad_close(weight_grad, expected[2], "weight grad")
    ignored = target == -100
    assert not input_grad[ignored].any()  # exactly 0, as the rows never ran
    if reduction == "none":
        assert not loss[ignored].any()


def test_gathered_rows_agree_with_running_every_row(monkeypatch):
    input, weight, target = problem(lead=(40,), v=300, seed=9)
    target[::3] = -100
    monkeypatch.setattr(kept_rows, "MIN_IGNORED_VOCAB_PER_ROW", 10**9)
    x = input.clone().requires_grad_()
    w = weight.clone().requires_grad_()
    every = ascend_ops.linear_cross_entropy(x, w, target)
    assert every.grad_fn.saved.kept is None
    every.backward()
    gathered = run_gathered(input, weight, target, None, monkeypatch)
    torch.testing.assert_close(gathered[0], every.detach(), rtol=1e-6, atol=1e-6)
    assert_grad_close(gathered[1], x.grad.double(), "input grad")
    assert_grad_close(gathered[2], w.grad.double(), "weight grad")


def test_a_frozen_head_or_input_still_gets_its_gradient(monkeypatch):
    input, weight, target = problem(lead=(30,), v=40, seed=2)
    monkeypatch.setattr(kept_rows, "MIN_IGNORED_VOCAB_PER_ROW", 0)
    x = input.clone().requires_grad_()
    loss = ascend_ops.linear_cross_entropy(x, weight, target)
    assert loss.grad_fn.saved.kept is not None
    loss.backward()
    expected = truth(input, weight, target, "mean")
    assert_grad_close(x.grad, expected[1], "input grad")
