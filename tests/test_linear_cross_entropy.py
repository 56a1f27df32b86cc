"""ascend_ops.linear_cross_entropy in one process against float64 autograd of plain torch
(the multi-rank runs are in test_distributed.py)."""

import pytest
import torch
import torch.nn.functional as F

import ascend_ops
from ascend_ops import testing
from ascend_ops.training.lce import HIGH_PERFORMANCE, MEMORY_SAVING


def problem(lead=(4, 9), h=19, v=53, dtype=torch.bfloat16, seed=0, ignore_index=-100):
    gen = torch.Generator().manual_seed(seed)
    input = (torch.randn(*lead, h, generator=gen) / 2).to(dtype)
    weight = torch.randn(v, h, generator=gen).to(dtype)
    target = torch.randint(0, v, lead, generator=gen)
    if target.numel() > 2:
        target.view(-1)[1:3] = ignore_index
    return input, weight, target


def truth(input, weight, target, reduction, ignore_index=-100, grad=None):
    x = input.double().requires_grad_()
    w = weight.double().requires_grad_()
    loss = F.cross_entropy((x @ w.T).reshape(-1, w.size(0)), target.reshape(-1),
                           reduction=reduction, ignore_index=ignore_index)
    if reduction == "none":
        loss = loss.view(target.shape)
    loss.backward(None if grad is None else grad.double())
    return loss.detach(), x.grad, w.grad


def assert_grad_close(ours, expected, what):
    testing.assert_half_grad_close(ours, expected, what)


def run(input, weight, target, grad=None, **options):
    x = input.clone().requires_grad_()
    w = weight.clone().requires_grad_()
    loss = ascend_ops.linear_cross_entropy(x, w, target, **options)
    loss.backward(grad)
    return loss.detach(), x.grad, w.grad


@pytest.mark.parametrize("grad_cache_mib", [None, "0"], ids=["cache-default", "cache-off"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("mode", [MEMORY_SAVING, HIGH_PERFORMANCE])
def test_matches_cross_entropy_autograd(mode, reduction, dtype, grad_cache_mib, monkeypatch):
    if grad_cache_mib is None:
        monkeypatch.delenv("ASCEND_OPS_LCE_GRAD_CACHE_MIB", raising=False)
    else:  # memory-saving mode recomputes (high-performance mode caches regardless)
        monkeypatch.setenv("ASCEND_OPS_LCE_GRAD_CACHE_MIB", grad_cache_mib)
    input, weight, target = problem(dtype=dtype)
    grad = torch.rand(target.shape) if reduction == "none" else None
    loss, input_grad, weight_grad = run(input, weight, target, grad, reduction=reduction, mode=mode)
    expected = truth(input, weight, target, reduction, grad=grad)
    assert loss.dtype == torch.float32 and loss.shape == expected[0].shape
    assert input_grad.dtype == weight_grad.dtype == dtype
    torch.testing.assert_close(loss.double(), expected[0], rtol=1e-5, atol=1e-5)
    assert_grad_close(input_grad, expected[1], "input grad")
    assert_grad_close(weight_grad, expected[2], "weight grad")


def test_both_modes_agree():
    input, weight, target = problem(seed=3)
    a = run(input, weight, target, mode=MEMORY_SAVING)
    b = run(input, weight, target, mode=HIGH_PERFORMANCE)
    torch.testing.assert_close(a[0], b[0])
    for x, y in zip(a[1:], b[1:]):
        assert_grad_close(x, y.double(), "modes")


def test_ignore_index_may_be_a_vocabulary_id():
    input, weight, target = problem(lead=(17,), ignore_index=5, seed=4)
    loss, input_grad, weight_grad = run(input, weight, target, ignore_index=5)
    expected = truth(input, weight, target, "mean", ignore_index=5)
    torch.testing.assert_close(loss.double(), expected[0], rtol=1e-5, atol=1e-5)
    assert_grad_close(input_grad, expected[1], "input grad")
    assert torch.equal(input_grad[1:3], torch.zeros_like(input_grad[1:3]))  # ignored rows


def test_every_row_ignored_gives_nan_mean_and_zero_gradients():
    input, weight, _ = problem(lead=(3,))
    loss, input_grad, weight_grad = run(input, weight, torch.full((3,), -100))
    assert loss.isnan()  # as F.cross_entropy: 0 / 0
    assert not input_grad.any() and not weight_grad.any()


def test_empty_batch():
    input, weight, target = problem(lead=(0,))
    loss, input_grad, weight_grad = run(input, weight, target, reduction="sum")
    assert loss.item() == 0.0 and input_grad.shape == (0, 19) and not weight_grad.any()


def test_vocab_start_index_without_a_group_is_a_shard_of_one():
    input, weight, target = problem(lead=(6,))
    a = run(input, weight, target)
    b = run(input, weight, torch.where(target == -100, -100, target + 100), vocab_start_index=100)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_module_wrapper():
    input, weight, target = problem()
    module = ascend_ops.nn.LinearCrossEntropyLoss(reduction="sum", mode=HIGH_PERFORMANCE)
    assert "high-performance" in repr(module)
    torch.testing.assert_close(module(input, weight, target),
                               ascend_ops.linear_cross_entropy(input, weight, target, reduction="sum"))


def test_memory_saving_keeps_no_logits_for_the_backward(monkeypatch):
    # With the CPU's gradient cache off (test_grad_cache.py covers it), as on the NPU.
    monkeypatch.setenv("ASCEND_OPS_LCE_GRAD_CACHE_MIB", "0")
    input, weight, target = problem(lead=(64,), v=500)
    x = input.clone().requires_grad_()
    loss = ascend_ops.linear_cross_entropy(x, weight.clone().requires_grad_(), target)
    saved = [t.numel() for t in loss.grad_fn.saved_tensors]
    assert max(saved) == weight.numel()  # the weight itself; nothing of size BT x V
    assert loss.grad_fn.once_softmax is None


@pytest.mark.parametrize("mode", [MEMORY_SAVING, HIGH_PERFORMANCE])
@pytest.mark.parametrize("cache_mib", ["0", "128"])
def test_a_second_backward_with_retain_graph_gives_the_same_gradients(mode, cache_mib, monkeypatch):
    """High-performance mode hands its softmax to the first backward as scratch: a second
    backward (retain_graph) recomputes from the statistics and must agree."""
    monkeypatch.setenv("ASCEND_OPS_LCE_GRAD_CACHE_MIB", cache_mib)
    input, weight, target = problem()
    x = input.clone().requires_grad_()
    loss = ascend_ops.linear_cross_entropy(x, weight, target, mode=mode)
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    loss.backward()
    assert_grad_close(x.grad, 2 * first.double(), "the two backwards' sum")


def test_a_weight_changed_in_place_before_the_backward_is_refused():
    """The forward's tensors are saved tensors: an optimizer step between the forward and
    the backward is autograd's error, not a gradient of the wrong weight."""
    input, weight, target = problem()
    w = weight.clone().requires_grad_()
    for options in (dict(), dict(softcap=2.0)):
        loss = ascend_ops.linear_cross_entropy(input.clone().requires_grad_(), w, target, **options)
        with torch.no_grad():
            w.mul_(0.5)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


@pytest.mark.parametrize("change, message", [
    (dict(mode="fast"), "'mode' must be one of"),
    (dict(reduction="max"), "'reduction' must be one of"),
])
def test_bad_options(change, message):
    with pytest.raises(ValueError, match=message):
        ascend_ops.linear_cross_entropy(*problem(), **change)


def test_bad_target_shape():
    input, weight, target = problem()
    with pytest.raises(ValueError, match="'target' must have input's leading shape"):
        ascend_ops.linear_cross_entropy(input, weight, target[:, :3])


def test_target_outside_the_vocabulary():
    input, weight, target = problem(lead=(5,))
    target[2] = 53
    with pytest.raises(ValueError, match=r"target\[2\] = 53 held by 0 shards"):
        ascend_ops.linear_cross_entropy(input, weight, target)


def test_float64_input_is_refused():
    input, weight, target = problem(dtype=torch.float64)
    with pytest.raises(TypeError, match="'input' must be torch.float16 or torch.bfloat16 or "
                                        "torch.float32, got torch.float64"):
        ascend_ops.linear_cross_entropy(input, weight, target)


def test_float32_runs_on_the_options_kernels():
    input, weight, target = problem(dtype=torch.float32)
    loss, input_grad, weight_grad = run(input, weight, target)
    expected = truth(input, weight, target, "mean")
    torch.testing.assert_close(loss.double(), expected[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(input_grad.double(), expected[1], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(weight_grad.double(), expected[2], rtol=1e-4, atol=1e-5)


def test_two_all_reduces_per_forward(monkeypatch):
    # One max, then one sum of the stacked rescaled statistics (world size 1 stand-in).
    from ascend_ops.training.lce import statistics as module

    calls = []
    monkeypatch.setattr(module.dist, "all_reduce",
                        lambda tensor, op, group: calls.append((op, tuple(tensor.shape))))
    stats = [torch.rand(5) for _ in range(3)]
    module.combine_row_statistics(*stats, torch.ones(5), group=object())
    assert calls == [(module.dist.ReduceOp.MAX, (5,)), (module.dist.ReduceOp.SUM, (3, 5))]


def test_owner_check_reads_no_accelerator_tensor_on_the_host(monkeypatch):
    """On a device other than CPU the check must not read `bad` on the host (it would stall
    the stream): with no device-side assert registered it is skipped, unless the debug
    switch asks for it. A meta tensor stands in for such a device (it has no values)."""
    from ascend_ops.training.lce.statistics import check_one_owner

    bad = torch.ones(4, dtype=torch.bool, device="meta")
    rows = owners = torch.zeros(4, device="meta")
    monkeypatch.delenv("ASCEND_OPS_NPU_CHECK_TARGETS", raising=False)
    check_one_owner(bad, rows, owners, -100)  # no host read: nothing raised
    monkeypatch.setenv("ASCEND_OPS_NPU_CHECK_TARGETS", "1")
    with pytest.raises(RuntimeError):  # the debug switch reads it on the host (meta: no values)
        check_one_owner(bad, rows, owners, -100)
    cpu_bad = torch.tensor([False, True])
    with pytest.raises(ValueError, match=r"got target\[1\] = 7 held by 0 shards"):
        check_one_owner(cpu_bad, torch.tensor([3, 7]), torch.tensor([1.0, 0.0]), -100)


@pytest.mark.parametrize("mode", [MEMORY_SAVING, HIGH_PERFORMANCE])
def test_every_collective_gets_tensors_on_the_inputs_device(mode, monkeypatch):
    """An hccl group takes device tensors only: every collective of a training step (the
    forward's statistics, the plan of the gradient cache, all_reduce_grad's backward)
    must get tensors on the device of the inputs. Meta tensors stand in for an NPU: the
    operators run their fake kernels, and the collectives are recorded instead of run."""
    from ascend_ops import ops
    from ascend_ops.training.lce import statistics

    seen = []

    def record(name):
        def collective(tensor_or_list, *args, **kwargs):
            tensors = tensor_or_list if isinstance(tensor_or_list, list) else [tensor_or_list]
            tensors += [a for a in args if isinstance(a, torch.Tensor)]
            seen.extend((name, t.device.type) for t in tensors)
        return collective

    dist = statistics.dist  # torch.distributed, as every module of the wing sees it
    for name in ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all"):
        monkeypatch.setattr(dist, name, record(name))
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(ops, "resolve", lambda impl, device, op: "cpu")  # the fake kernels
    group = object()
    input, weight, target = (t.to("meta") for t in problem())
    x = input.requires_grad_()
    w = weight.requires_grad_()
    loss = ascend_ops.linear_cross_entropy(ascend_ops.distributed.all_reduce_grad(x, group),
                                           w, target, process_group=group,
                                           vocab_start_index=0, mode=mode)
    loss.backward()
    assert x.grad is not None and w.grad is not None
    names = {name for name, _ in seen}
    assert {"all_reduce"} <= names and len(seen) >= 3, seen  # statistics and the backward's
    assert all(device == "meta" for _, device in seen), seen
