"""Which implementation each loss-option set takes (training/routes.py, docs/npu.md "Loss
options on the NPU"), checked on CPU: the route table, the NPU routes' device-agnostic code
run on CPU tensors against float64 autograd, and the refusal, naming the option, when our
op package cannot take what CANN's op cannot express."""

from __future__ import annotations

import json
import types

import pytest
import torch

from ascend_ops import testing
from ascend_ops.npu import options_support
from ascend_ops.training import lce_options, options_device, routes

from lce_options_oracle import STRONG, oracle, problem

NPU = types.SimpleNamespace(type="npu")  # routes.choose reads the device type only
CPU = torch.device("cpu")


def opts(**kw):
    defaults = dict(label_smoothing=0.0, logit_scale=1.0, softcap=None, lse_square_scale=0.0,
                    return_z_loss=False, return_lse=False, return_token_accuracy=False)
    return lce_options.check_loss_options(**{**defaults, **kw})


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
    chosen = routes.choose(NPU, torch.bfloat16, opts(**options), bias, weights)
    assert (chosen.name, chosen.needs) == (route, needs)
    on_cpu = routes.choose(CPU, torch.bfloat16, opts(**options), bias, weights)
    assert on_cpu.name == (routes.FUSED_PLAIN if route == routes.FUSED_PLAIN else routes.CPU_OPTIONS)
    assert routes.choose(CPU, torch.float32, opts(**options), bias, weights).name == routes.CPU_OPTIONS


@pytest.mark.parametrize("route", [routes.NPU_OPERATORS, routes.NPU_COMPOSITION_OPERATORS])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_the_cann_routes_match_float64_autograd(route, reduction, monkeypatch):
    """Class weights (CANN's op takes them as each row's gradient), the lse and, on the
    composition route, token accuracy; the composition forward in row chunks (7 here)."""
    monkeypatch.setattr(options_device, "COMPOSITION_CHUNK_BYTES", 6 * 67 * 4)
    x, w, t, _, cw = problem(ce_weight=True)
    accuracy = route == routes.NPU_COMPOSITION_OPERATORS
    options = opts(return_lse=True, return_z_loss=True, return_token_accuracy=accuracy)
    assert routes.choose(NPU, x.dtype, options, False, True).name == route
    grad = torch.rand(t.shape) + 0.5 if reduction == "none" else None
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    loss, z_loss, lse, acc = routes.run(routes.choose(NPU, x.dtype, options, False, True),
                                        xr, wr, None, t, cw, options, -100, reduction, None, 0,
                                        "memory-saving", True, t.shape)
    loss.backward(grad)
    want, want_grads = oracle(x, w, t, ce_weight=cw, reduction=reduction, grad=grad)
    torch.testing.assert_close(loss.double(), want["loss"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse.double(), want["lse"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(z_loss.double(), want["z_loss"])
    if accuracy:
        torch.testing.assert_close(acc.double(), want["token_accuracy"])
    testing.assert_half_grad_close(xr.grad, want_grads["input"], "input grad")
    testing.assert_half_grad_close(wr.grad, want_grads["weight"], "weight grad")


@pytest.mark.parametrize("names", [("softcap",), ("linear_bias",), ("label_smoothing", "ce_weight"),
                                   ("lse_square_scale",), ("logit_scale",)])
def test_options_cann_cannot_express_are_refused_naming_the_option_before_any_work(names):
    x, w, t, b, cw = problem(bias="linear_bias" in names, ce_weight="ce_weight" in names)
    options = opts(**{n: STRONG[n] for n in names if n not in ("linear_bias", "ce_weight")})
    route = routes.choose(NPU, x.dtype, options, b is not None, cw is not None)
    assert route.backward == "npu_custom"
    with pytest.raises(NotImplementedError, match=f"the options {names[0]}.*need our Ascend C op "
                                                  f"\\(npu_custom\\).*'{names[0]}' needs our op "
                                                  "package and it cannot run: torch_npu is not"):
        routes.run(route, x.requires_grad_(), w, b, t, cw, options, -100, "mean", None, 0,
                   "memory-saving", True, t.shape)
    assert x.grad is None


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
    needs = {"softcap": routes.CUSTOM_OP_NEEDS["softcap"]}
    assert options_support.declared_names(today) >= {"grad", "softmax", "label_smoothing"}
    reason = options_support.missing_reason(needs, today, None, object())
    assert reason.startswith(f"'softcap' needs {options_support.OP_TYPE} to take 'softcap'")
    reason = options_support.missing_reason(
        {"lse_square_scale": routes.CUSTOM_OP_NEEDS["lse_square_scale"]}, today, None, object())
    assert "to take 'alpha', 'beta'" in reason and "does not declare them" in reason

    later = tmp_path / "later"
    write_package(later, ["grad", "input", "weight", "alpha", "beta", "gamma", "bias",
                          "class_weight"], ["logit_scale", "softcap"])
    every = {name: routes.CUSTOM_OP_NEEDS[name] for name in routes.CUSTOM_OP_NEEDS}
    # declared, but this build's adapter has no entry point passing them
    reason = options_support.missing_reason(every, later, None, object())
    assert options_support.ADAPTER_ENTRY in reason
    adapter = types.SimpleNamespace(**{options_support.ADAPTER_ENTRY: lambda *a: None})
    assert options_support.missing_reason(every, later, None, adapter) is None
