"""Which route runs each loss-option set (training/lce/routes.py, docs/npu.md "Loss
options on the NPU"), checked on CPU: the route table, `impl=` forcing each route (the NPU
routes' device-agnostic code runs on CPU tensors, against float64 autograd), and the
refusals, each naming the option or listing every route's reason."""

from __future__ import annotations

import json
import types

import pytest
import torch

import ascend_ops
from ascend_ops import testing
from ascend_ops.npu import options_support
from ascend_ops.training.lce import checks, route_device, route_npu_custom, routes

from lce_options_oracle import STRONG, oracle, problem

DEFAULTS = dict(label_smoothing=0.0, logit_scale=1.0, softcap=None, lse_square_scale=0.0,
                return_z_loss=False, return_lse=False, return_token_accuracy=False)


def call_of(options=None, bias=False, weights=False, device="cpu", dtype=torch.bfloat16):
    """The checked call of an option set on tensors of `device` ("meta" stands in for an
    NPU: the route choice reads only the device type)."""
    x, w, t, b, cw = problem(dtype=dtype, bias=bias, ce_weight=weights)
    x, w, t = (v.to(device) for v in (x, w, t))
    b = b.to(device) if b is not None else None
    cw = cw.to(device) if cw is not None else None
    return checks.make_call(x, w, t, linear_bias=b, ce_weight=cw, ignore_index=-100,
                            reduction="mean", process_group=None, vocab_start_index=None,
                            mode="memory-saving", **{**DEFAULTS, **(options or {})})


# (options, bias, class weights) → (route on NPU tensors, the npu_custom needs)
TABLE = [
    (dict(), False, False, routes.FUSED_PLAIN, ()),
    (dict(return_lse=True), False, False, routes.NPU_OPERATORS, ()),
    (dict(return_z_loss=True), False, False, routes.NPU_OPERATORS, ()),
    (dict(), False, True, routes.NPU_OPERATORS, ()),
    (dict(return_token_accuracy=True), False, True, routes.NPU_COMPOSITION_OPERATORS, ()),
    (dict(), True, False, routes.NPU_COMPOSITION_CUSTOM, ("linear_bias",)),
    (dict(logit_scale=0.5), False, False, routes.NPU_COMPOSITION_CUSTOM, ("logit_scale",)),
    (dict(softcap=30.0), False, False, routes.NPU_COMPOSITION_CUSTOM, ("softcap",)),
    (dict(label_smoothing=0.1), False, False, routes.NPU_COMPOSITION_CUSTOM, ("label_smoothing",)),
    (dict(label_smoothing=0.1), False, True, routes.NPU_COMPOSITION_CUSTOM,
     ("label_smoothing", "ce_weight")),
    (dict(lse_square_scale=1e-4), False, True, routes.NPU_COMPOSITION_CUSTOM, ("lse_square_scale",)),
    (dict(softcap=30.0, lse_square_scale=1e-4, return_token_accuracy=True), False, False,
     routes.NPU_COMPOSITION_CUSTOM, ("softcap", "lse_square_scale")),
]


@pytest.mark.parametrize("options, bias, weights, route, needs", TABLE)
def test_the_route_of_each_option_set(options, bias, weights, route, needs):
    on_npu = call_of(options, bias, weights, device="meta")
    assert routes.choose(on_npu).name == route
    assert route_npu_custom.needs(on_npu) == needs
    on_cpu = routes.choose(call_of(options, bias, weights))
    assert on_cpu.name == (routes.FUSED_PLAIN if route == routes.FUSED_PLAIN else routes.CPU_OPTIONS)
    assert routes.choose(call_of(options, bias, weights, dtype=torch.float32)).name == routes.CPU_OPTIONS


def run_forced(impl, x, w, t, reduction="mean", grad=None, **kwargs):
    """linear_cross_entropy with impl= forced and every extra output asked for: the four
    outputs, and the gradients of loss.backward(grad)."""
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    out = ascend_ops.linear_cross_entropy(xr, wr, t, reduction=reduction, return_lse=True,
                                          return_z_loss=True, impl=impl, **kwargs)
    out.loss.backward(grad)
    return out, xr.grad, wr.grad


@pytest.mark.parametrize("impl", ["auto", routes.FUSED_PLAIN, routes.CPU_OPTIONS,
                                  routes.NPU_OPERATORS, routes.NPU_COMPOSITION_OPERATORS])
def test_impl_forces_each_route_that_can_run_plain_cross_entropy(impl):
    """Every route that runs here gives plain cross entropy's loss and gradients (the plain
    route returns nothing extra: its call asks for none)."""
    x, w, t, _, _ = problem()
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    loss = ascend_ops.linear_cross_entropy(xr, wr, t, impl=impl)
    loss.backward()
    want, want_grads = oracle(x, w, t)
    torch.testing.assert_close(loss.double(), want["loss"], rtol=1e-5, atol=1e-5)
    testing.assert_half_grad_close(xr.grad, want_grads["input"], "input grad")
    testing.assert_half_grad_close(wr.grad, want_grads["weight"], "weight grad")


def test_impl_that_cannot_run_the_call_raises_with_every_routes_reason():
    x, w, t, _, _ = problem()
    with pytest.raises(ValueError) as caught:
        ascend_ops.linear_cross_entropy(x, w, t, softcap=2.5, impl=routes.FUSED_PLAIN)
    message = str(caught.value)
    assert "impl='fused-plain' cannot run this call" in message
    assert "fused-plain: computes plain cross entropy only, and the call sets softcap" in message
    assert "cpu-options: can run it" in message
    assert ("npu-operators: the options softcap are beyond its operators (CANN's "
            "aclnnFusedLinearCrossEntropyLossGrad cannot express them)") in message
    assert "npu-composition+custom: on cpu tensors the options softcap need our Ascend C op" \
        in message
    with pytest.raises(ValueError, match="fused-plain: the fused operators take float16 or "
                                         "bfloat16, got float32"):
        ascend_ops.linear_cross_entropy(x.float(), w.float(), t, impl=routes.FUSED_PLAIN)
    with pytest.raises(ValueError, match=r"'impl' must be 'auto' or one of \('fused-plain'"):
        ascend_ops.linear_cross_entropy(x, w, t, impl="cpu")
    with pytest.raises(TypeError, match="'impl' must be a str or None, got int 1"):
        ascend_ops.linear_cross_entropy(x, w, t, impl=1)
    with pytest.raises(ValueError, match="cpu-options: runs on CPU tensors, got meta tensors"):
        ascend_ops.linear_cross_entropy(x.to("meta"), w.to("meta"), t.to("meta"), softcap=2.5,
                                        impl=routes.CPU_OPTIONS)
    with pytest.raises(ValueError, match="npu-composition\\+custom: runs our Ascend C op in the "
                                         "backward: 'npu_custom' needs our op package"):
        ascend_ops.linear_cross_entropy(x, w, t, impl=routes.NPU_COMPOSITION_CUSTOM)
    with pytest.raises(ValueError, match="npu-operators: the options return_token_accuracy are "
                                         "beyond its operators \\(CANN's forward has no argmax"):
        ascend_ops.linear_cross_entropy(x, w, t, return_token_accuracy=True,
                                        impl=routes.NPU_OPERATORS)


@pytest.mark.parametrize("route", [routes.NPU_OPERATORS, routes.NPU_COMPOSITION_OPERATORS])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_the_cann_routes_match_float64_autograd(route, reduction, monkeypatch):
    """Class weights (CANN's op takes them as each row's gradient), the lse and, on the
    composition route, token accuracy; the composition forward in row chunks (7 here)."""
    monkeypatch.setattr(route_device, "COMPOSITION_CHUNK_BYTES", 6 * 67 * 4)
    x, w, t, _, cw = problem(ce_weight=True)
    accuracy = route == routes.NPU_COMPOSITION_OPERATORS
    grad = torch.rand(t.shape) + 0.5 if reduction == "none" else None
    (loss, z_loss, lse, acc), xgrad, wgrad = run_forced(
        route, x, w, t, reduction, grad, ce_weight=cw, return_token_accuracy=accuracy)
    want, want_grads = oracle(x, w, t, ce_weight=cw, reduction=reduction, grad=grad)
    torch.testing.assert_close(loss.double(), want["loss"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse.double(), want["lse"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(z_loss.double(), want["z_loss"])
    if accuracy:
        torch.testing.assert_close(acc.double(), want["token_accuracy"])
    testing.assert_half_grad_close(xgrad, want_grads["input"], "input grad")
    testing.assert_half_grad_close(wgrad, want_grads["weight"], "weight grad")


@pytest.mark.parametrize("names", [("softcap",), ("linear_bias",), ("label_smoothing", "ce_weight"),
                                   ("lse_square_scale",), ("logit_scale",)])
def test_options_cann_cannot_express_are_refused_naming_the_option_before_any_work(names):
    x, w, t, b, cw = problem(bias="linear_bias" in names, ce_weight="ce_weight" in names)
    options = {n: STRONG[n] for n in names if n not in ("linear_bias", "ce_weight")}
    xr = x.requires_grad_()
    with pytest.raises(NotImplementedError, match=f"the options {names[0]}.*need our Ascend C op "
                                                  f"\\(npu_custom\\).*'{names[0]}' needs our op "
                                                  "package and it cannot run: torch_npu is not"):
        ascend_ops.linear_cross_entropy(xr.to("meta"), w.to("meta"), t.to("meta"),
                                        linear_bias=None if b is None else b.to("meta"),
                                        ce_weight=None if cw is None else cw.to("meta"), **options)
    with pytest.raises(ValueError, match=f"on cpu tensors the options {names[0]}"):
        ascend_ops.linear_cross_entropy(xr, w, t, linear_bias=b, ce_weight=cw,
                                        impl=routes.NPU_COMPOSITION_CUSTOM, **options)
    assert xr.grad is None


def write_package(vendor, inputs, attrs):
    """An installed op package's ops-info json declaring the FLCE op's inputs and attributes."""
    config = vendor / "op_impl" / "ai_core" / "tbe" / "config" / "ascend910b"
    config.mkdir(parents=True)
    entry = {f"input{i}": {"name": n} for i, n in enumerate(inputs)}
    entry["attr"] = {"list": ",".join(attrs)}
    (config / "aic-ascend910b-ops-info.json").write_text(json.dumps({options_support.OP_TYPE: entry}))


def test_what_the_installed_package_declares_decides(tmp_path):
    today = tmp_path / "today"
    write_package(today, ["grad", "input", "weight", "target_mask", "masked_target",
                          "logits_max", "sum_exp_logits", "softmax"], ["label_smoothing"])
    needs = {"softcap": route_npu_custom.CUSTOM_OP_NEEDS["softcap"]}
    assert options_support.declared_names(today) >= {"grad", "softmax", "label_smoothing"}
    reason = options_support.missing_reason(needs, today, None, object())
    assert reason.startswith(f"'softcap' needs {options_support.OP_TYPE} to take 'softcap'")
    reason = options_support.missing_reason(
        {"lse_square_scale": route_npu_custom.CUSTOM_OP_NEEDS["lse_square_scale"]}, today, None, object())
    assert "to take 'alpha', 'beta'" in reason and "does not declare them" in reason

    later = tmp_path / "later"
    write_package(later, ["grad", "input", "weight", "alpha", "beta", "gamma", "bias",
                          "class_weight"], ["logit_scale", "softcap"])
    every = {name: route_npu_custom.CUSTOM_OP_NEEDS[name] for name in route_npu_custom.CUSTOM_OP_NEEDS}
    # declared, but this build's adapter has no entry point passing them
    reason = options_support.missing_reason(every, later, None, object())
    assert options_support.ADAPTER_ENTRY in reason
    adapter = types.SimpleNamespace(**{options_support.ADAPTER_ENTRY: lambda *a: None})
    assert options_support.missing_reason(every, later, None, adapter) is None
