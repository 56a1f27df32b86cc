"""torch's own F.linear_cross_entropy / nn.LinearCrossEntropyLoss (chunked path, options=
LinearCrossEntropyOptions()) on our kernels once ascend_ops.torch_linear_cross_entropy is
enabled: torch's results (loss and gradients within bf16 tolerance of torch's own body and
of float64 autograd), its op contract (compute_* flags, allow_retain_graph, acc_dtype,
class weights, bias), what we refuse going to torch's body, and the switch itself."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ascend_ops import testing
from ascend_ops import torch_linear_cross_entropy as bridge

from lce_options_oracle import oracle, problem

OPTIONS = torch.nn.LinearCrossEntropyOptions


@pytest.fixture
def enabled():
    assert bridge.enable()
    yield
    bridge.disable()


def run(x, w, t, b=None, cw=None, grad=None, **kw):
    """loss and gradients of torch's F.linear_cross_entropy with options."""
    xr = x.clone().requires_grad_()
    wr = w.clone().requires_grad_()
    br = b.clone().requires_grad_() if b is not None else None
    loss = F.linear_cross_entropy(xr, wr, t, linear_bias=br, weight=cw,
                                  options=kw.pop("options", OPTIONS()), **kw)
    loss.backward(grad)
    return loss.detach(), xr.grad, wr.grad, (br.grad if br is not None else None)


def counted(function):
    before = dict(bridge.calls)
    result = function()
    return result, {k: bridge.calls[k] - before[k] for k in before}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("extras", ["plain", "bias+weights"])
def test_torchs_api_runs_our_kernels_with_torchs_results(extras, reduction, dtype):
    x, w, t, b, cw = problem(dtype=dtype, bias=extras != "plain", ce_weight=extras != "plain")
    cw = cw.to(dtype) if cw is not None else None  # torch's class weight is the logits' dtype
    grad = torch.rand(t.shape).to(dtype) if reduction == "none" else None
    theirs = run(x, w, t, b, cw, grad, reduction=reduction)  # torch's own body
    assert bridge.enable()
    try:
        ours, served = counted(lambda: run(x, w, t, b, cw, grad, reduction=reduction))
    finally:
        bridge.disable()
    assert served == {"ours": 2 if reduction == "none" else 1, "torch": 0}
    want, want_grads = oracle(x, w, t, linear_bias=b, ce_weight=cw, reduction=reduction, grad=grad)
    assert ours[0].dtype == theirs[0].dtype == dtype
    tol = dict(rtol=2**-7, atol=1e-2) if dtype != torch.float32 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours[0].double(), want["loss"], **tol)
    torch.testing.assert_close(ours[0], theirs[0], **tol)
    names = ["input", "weight"] + (["linear_bias"] if b is not None else [])
    for name, mine, torchs in zip(names, ours[1:], theirs[1:]):
        assert mine.dtype == torchs.dtype == dtype, name
        if dtype == torch.float32:
            torch.testing.assert_close(mine.double(), want_grads[name], rtol=1e-4, atol=1e-5)
        else:
            testing.assert_half_grad_close(mine, want_grads[name], name)
            testing.assert_half_grad_close(mine, torchs.double(), f"{name} vs torch's")


def test_torchs_module_runs_our_kernels(enabled):
    torch.manual_seed(0)
    module = torch.nn.LinearCrossEntropyLoss(24, 67, bias=True, dtype=torch.bfloat16,
                                             options=OPTIONS())
    x, _, t, _, _ = problem()
    (loss, served) = counted(lambda: module(x, t))
    loss.backward()
    assert served["ours"] == 1 and served["torch"] == 0
    assert all(p.grad is not None for p in module.parameters())  # weight and bias


def test_compute_flags_follow_requires_grad(enabled):
    x, w, t, b, _ = problem(bias=True)
    loss = F.linear_cross_entropy(x, w.requires_grad_(), t, linear_bias=b, options=OPTIONS())
    loss.backward()
    assert w.grad is not None and b.grad is None and x.grad is None
    with torch.no_grad():
        (_, served) = counted(lambda: F.linear_cross_entropy(x, w, t, options=OPTIONS()))
    assert served == {"ours": 1, "torch": 0}


def test_allow_retain_graph(enabled):
    x, w, t, _, _ = problem()
    xr = x.clone().requires_grad_()
    loss = F.linear_cross_entropy(xr, w, t, options=OPTIONS(allow_retain_graph=True))
    loss.backward(retain_graph=True)
    first = xr.grad.clone()
    loss.backward()
    torch.testing.assert_close(xr.grad, 2 * first)
    loss = F.linear_cross_entropy(xr, w, t, options=OPTIONS())
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward called twice"):
        loss.backward()


def test_what_we_cannot_serve_runs_torchs_body_with_one_warning(enabled, monkeypatch):
    monkeypatch.setattr(bridge, "_warned", set())
    x, w, t, _, _ = problem()
    bf16_acc = OPTIONS(acc_policy="balanced", acc_dtype=torch.bfloat16)  # on CPU: torch's body
    with pytest.warns(UserWarning, match="runs its own body") as warned:
        for _ in range(2):
            (_, served) = counted(lambda: run(x, w, t, options=bf16_acc))
            assert served == {"ours": 0, "torch": 1}
    lines = [str(w.message) for w in warned if "runs its own body" in str(w.message)]
    assert len(lines) == 1 and "acc_dtype torch.bfloat16 on cpu" in lines[0], lines


def test_a_different_schema_leaves_torch_alone(monkeypatch):
    monkeypatch.setitem(bridge.SCHEMAS, bridge.CHUNKED, "torch_nn::something_else() -> Tensor")
    with pytest.warns(UserWarning, match="leaves torch's linear_cross_entropy alone"):
        assert bridge.enable() is False
    x, w, t, _, _ = problem()
    (_, served) = counted(lambda: run(x, w, t))
    assert served == {"ours": 0, "torch": 0}


def test_enable_and_disable_are_reversible():
    x, w, t, _, _ = problem()
    for _ in range(2):
        assert bridge.enable() and bridge.enable()  # idempotent
        assert all(bridge.status().values())
        (_, served) = counted(lambda: run(x, w, t, reduction="none", grad=torch.ones(t.shape)))
        assert served == {"ours": 2, "torch": 0}
        bridge.disable()
        bridge.disable()
        assert not any(bridge.status().values())
        (_, served) = counted(lambda: run(x, w, t, reduction="none", grad=torch.ones(t.shape)))
        assert served == {"ours": 0, "torch": 0}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_torch_compile_traces_every_reduction_with_gradients(reduction, enabled):
    """aot_eager traces the backward of "none" on fake tensors: our backward is an op with a
    fake kernel (none_backward), not a call into the C++ kernels on tensors without data."""
    torch._dynamo.reset()
    x, w, t, b, cw = problem(bias=True, ce_weight=True)
    grad = torch.rand(t.shape) + 0.5 if reduction == "none" else None
    eager, served = counted(lambda: run(x, w, t, b, cw.to(x.dtype), grad, reduction=reduction))
    assert served["ours"] >= 1 and served["torch"] == 0

    def step(x, w, t, b, cw):
        return F.linear_cross_entropy(x, w, t, linear_bias=b, weight=cw, reduction=reduction,
                                      options=OPTIONS())

    xr, wr, br = (v.clone().requires_grad_() for v in (x, w, b))
    compiled, served = counted(lambda: torch.compile(step, backend="aot_eager")(
        xr, wr, t, br, cw.to(x.dtype)))
    compiled.backward(grad)
    assert served["torch"] == 0
    torch.testing.assert_close(compiled.detach(), eager[0])
    for name, mine, want in zip(("input", "weight", "bias"), (xr.grad, wr.grad, br.grad), eager[1:]):
        torch.testing.assert_close(mine, want, msg=name)


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("target, message", [
    (lambda t: t.reshape(-1, 1), r"'target' must have input's leading shape \(37,\), got \(37, 1\)"),
    (lambda t: t[:-1], r"'target' must have input's leading shape \(37,\), got \(36,\)"),
    (lambda t: torch.where(torch.arange(37) == 4, 67, t),
     r"'target' must be a class index in \[0, 67\) or ignore_index=-100, got target\[4\] = 67"),
    (lambda t: torch.where(torch.arange(37) == 6, -3, t),
     r"'target' must be a class index in \[0, 67\) or ignore_index=-100, got target\[6\] = -3"),
])
def test_a_bad_target_raises_torchs_exception_type(target, message, reduction, enabled):
    """torch's own body raises RuntimeError for each of these; so do our kernels, naming the
    argument and never returning a value (a (N, 1) target once broadcast to N x N)."""
    x, w, t, _, _ = problem()
    bad = target(t)
    bridge.disable()
    with pytest.raises(RuntimeError):
        F.linear_cross_entropy(x, w, bad, reduction=reduction, options=OPTIONS())
    assert bridge.enable()
    with pytest.raises(RuntimeError, match=message):
        F.linear_cross_entropy(x, w, bad, reduction=reduction, options=OPTIONS())


def test_argument_names_are_torchs(enabled):
    x, w, t, _, cw = problem(ce_weight=True)
    with pytest.raises(RuntimeError, match=r"'weight' must be \[V\] = \[67\], got shape \[66\]"):
        F.linear_cross_entropy(x, w, t, weight=cw[:-1].to(x.dtype), options=OPTIONS())
