"""Which route runs a linear_cross_entropy call (SPEC §7; docs/npu.md "Loss options on the
NPU"), and the one autograd Function every route runs under.

    route             when "auto" takes it                      forward                backward
    fused-plain       no option (plain cross entropy), half     the SPEC §3 operators  SPEC §1 operator
                      dtypes, any device                        (or, on CPU bfloat16, the logits-gradient cache)
    cpu-options       any option, or float32, on CPU            lce_options kernels    lce_options kernels
    npu-operators     on an accelerator, only options CANN can  SPEC §3 operators      SPEC §1 operator with
                      express: ce_weight, return_lse,                                  per-row grad a·w[t]
                      return_z_loss (lse_square_scale 0)
    npu-composition   as npu-operators, plus return_token_      chunked torch on the   SPEC §1 operator
      +operators      accuracy (CANN's forward has no argmax)   device (never [BT, V])
    npu-composition   on an accelerator, any option CANN cannot chunked torch on the   our Ascend C op
      +custom         express (linear_bias, logit_scale,        device                 (npu_custom) with the
                      softcap, label_smoothing, lse_square_scale)                      options as inputs and attributes

CANN's aclnnFusedLinearCrossEntropyLossGrad computes G = (softmax − onehot)·grad per row
(labelSmoothing must be 0): class weights only scale a row's gradient (grad = a·w[t]), so
they fit; a bias, scale or soft-cap changes the logits it recomputes, and smoothing and
z-loss add terms it does not have. The last route needs our op package to take them
(route_npu_custom.py); when it does not, the call fails before any work with an error
naming the option. Nothing falls back to the full [BT, V] logits.

`impl=` forces a route (the npu-* routes run on CPU tensors too: device-agnostic torch over
the operators); a route that cannot run the call raises, with every route's reason.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from . import route_cpu_options as _cpu_options
from . import route_device as _device
from . import route_plain as _plain
from .call import LceCall

__all__ = ["Route", "ROUTES", "ROUTE_NAMES", "choose", "resolve", "why_not", "run",
           "forward_backward"]

FUSED_PLAIN = "fused-plain"
CPU_OPTIONS = "cpu-options"
NPU_OPERATORS = "npu-operators"
NPU_COMPOSITION_OPERATORS = "npu-composition+operators"
NPU_COMPOSITION_CUSTOM = "npu-composition+custom"


@dataclass(frozen=True)
class Route:
    name: str
    forward: str   # "operators", "cpu-kernels" or "composition"
    backward: str  # "operators", "cpu-kernels" or "npu_custom"


ROUTES = {r.name: r for r in (
    Route(FUSED_PLAIN, "operators", "operators"),
    Route(CPU_OPTIONS, "cpu-kernels", "cpu-kernels"),
    Route(NPU_OPERATORS, "operators", "operators"),
    Route(NPU_COMPOSITION_OPERATORS, "composition", "operators"),
    Route(NPU_COMPOSITION_CUSTOM, "composition", "npu_custom"),
)}
ROUTE_NAMES = tuple(ROUTES)

#: The routes "auto" considers, in its order of preference, by where the tensors are.
_AUTO_ON_CPU = (FUSED_PLAIN, CPU_OPTIONS)
_AUTO_ON_DEVICE = (FUSED_PLAIN, NPU_OPERATORS, NPU_COMPOSITION_OPERATORS, NPU_COMPOSITION_CUSTOM)


def why_not(route: Route, call: LceCall) -> str | None:
    """Why `route` cannot run `call`, or None."""
    if route.name == FUSED_PLAIN:
        return _plain.why_not(call)
    if route.name == CPU_OPTIONS:
        return _cpu_options.why_not(call)
    return _device.why_not(route.forward, route.backward, call)


def choose(call: LceCall) -> Route:
    """The route "auto" takes: the first of its list for the device that can express the
    call's options. The last route of the device's list is taken even when it cannot run
    here (our op package lacking): run() then raises, naming the option."""
    names = _AUTO_ON_CPU if call.input.device.type == "cpu" else _AUTO_ON_DEVICE
    for name in names[:-1]:
        if why_not(ROUTES[name], call) is None:
            return ROUTES[name]
    return ROUTES[names[-1]]


def resolve(call: LceCall, impl: str | None) -> Route:
    """The route of `impl` ("auto" or None: choose(); else a route name) that can run `call`;
    raises ValueError for an unknown name, NotImplementedError (naming the option) where
    "auto"'s route cannot run, and ValueError with every route's reason where a forced
    one cannot."""
    if impl is None or impl == "auto":
        route = choose(call)
        reason = why_not(route, call)
        if reason is not None:
            raise NotImplementedError(f"linear_cross_entropy: {reason}")
        return route
    if not isinstance(impl, str):
        raise TypeError(f"linear_cross_entropy: 'impl' must be a str or None, got "
                        f"{type(impl).__name__} {impl!r}")
    if impl not in ROUTES:
        raise ValueError(f"linear_cross_entropy: 'impl' must be 'auto' or one of {ROUTE_NAMES}, "
                         f"got {impl!r}")
    route = ROUTES[impl]
    if why_not(route, call) is not None:
        reasons = "; ".join(f"{name}: {why_not(r, call) or 'can run it'}"
                            for name, r in ROUTES.items())
        raise ValueError(f"linear_cross_entropy: impl={impl!r} cannot run this call ({reasons})")
    return route


def _forward(route: Route, call: LceCall):
    if route.name == FUSED_PLAIN:
        return _plain.forward(call)
    if route.name == CPU_OPTIONS:
        return _cpu_options.forward(call)
    return _device.forward(route.forward, route.backward, call)


def _backward(route: Route, saved, grad_loss: torch.Tensor, wants):
    if route.name == FUSED_PLAIN:
        return _plain.backward(saved, grad_loss, wants)
    if route.name == CPU_OPTIONS:
        return _cpu_options.backward(saved, grad_loss, wants)
    return _device.backward(saved, grad_loss, wants)


def run(route: Route, call: LceCall):
    """(loss, z_loss, lse, token_accuracy) of `call` on `route`, differentiable in input,
    weight and linear_bias; None for an output not asked for."""
    bias = call.linear_bias
    if route.name == FUSED_PLAIN:  # traced whole by torch.compile (custom ops with fakes)
        outputs = _RouteFunction.apply(route, call, call.input, call.weight, bias)
    else:
        outputs = _run_eagerly(route, call, bias)
    loss, z_loss, lse, accuracy = outputs
    o = call.options
    return (loss, z_loss if o.return_z_loss else None, lse if o.return_lse else None,
            accuracy if o.return_token_accuracy else None)


# The option routes call _C's kernels (CPU) or read option values in Python: under
# torch.compile they run eagerly, a graph break (the plain route's custom ops are traced).
@torch.compiler.disable
def _run_eagerly(route: Route, call: LceCall, bias):
    return _RouteFunction.apply(route, call, call.input, call.weight, bias)


def forward_backward(route: Route, call: LceCall, wants, upstream: torch.Tensor | None = None):
    """(loss, input_grad, weight_grad, bias_grad) of `call` on `route` without autograd (for
    a kernel that runs below it), the gradients for the upstream gradient `upstream` (1
    where None), None for what `wants` (input, weight, bias) leaves out."""
    (loss, *_), saved = _forward(route, call)
    grads = (None, None, None)
    if any(wants):
        grad_loss = torch.ones_like(loss) if upstream is None else upstream.reshape(loss.shape)
        grads = _backward(route, saved, grad_loss, wants)
    return (loss, *(g if want else None for g, want in zip(grads, wants)))


class _RouteFunction(torch.autograd.Function):
    """One route's forward and backward under autograd. `input`, `weight` and `bias` are
    the call's own tensors, passed again so that autograd sees what is differentiable.

    The tensors of the route's Saved go through save_for_backward (autograd then refuses a
    backward after one of them was modified in place, and a test can see what a step
    keeps), except a field whose metadata says otherwise: "attribute" stays in the Saved
    object; "once" is handed to the first backward only (the backward may use it as
    scratch; a second backward, with retain_graph, gets None and must do without). The
    backward builds a new Saved rather than changing the forward's: torch.compile traces
    no change to an object from outside the backward."""

    @staticmethod
    def forward(ctx, route, call, input, weight, bias):
        (loss, *extras), saved = _forward(route, call)
        names, once = [], []
        for f in dataclasses.fields(saved):
            value = getattr(saved, f.name)
            how = f.metadata.get("saved")
            if how == "once":
                setattr(ctx, f"once_{f.name}", value)
                once.append(f.name)
            elif isinstance(value, torch.Tensor) and how != "attribute":
                names.append(f.name)
        ctx.save_for_backward(*(getattr(saved, name) for name in names))
        ctx.saved = dataclasses.replace(saved, **{name: None for name in names + once})
        ctx.route, ctx.saved_names, ctx.once_names = route, names, once
        ctx.input_shape = input.shape  # the routes work on rows: [BT, H]
        extras = [t if t is not None else loss.new_empty(0) for t in extras]
        ctx.mark_non_differentiable(*extras)
        return (loss, *extras)

    @staticmethod
    def backward(ctx, grad_loss, *_extra_grads):
        restored = dict(zip(ctx.saved_names, ctx.saved_tensors))
        for name in ctx.once_names:
            restored[name] = getattr(ctx, f"once_{name}")
            setattr(ctx, f"once_{name}", None)
        saved = dataclasses.replace(ctx.saved, **restored)
        wants = tuple(ctx.needs_input_grad[2:5])
        input_grad, weight_grad, bias_grad = _backward(ctx.route, saved, grad_loss, wants)
        if input_grad is not None:
            input_grad = input_grad.reshape(ctx.input_shape)
        return None, None, input_grad, weight_grad, bias_grad
