"""Our kernels behind torch's own `F.linear_cross_entropy(..., options=LinearCrossEntropyOptions())`
and `nn.LinearCrossEntropyLoss`.

torch 2.13's chunked path calls two private custom ops (torch/nn/modules/linear_cross_entropy.py),
registered CompositeExplicitAutograd, one Python body for every device:

    torch_nn::_linear_cross_entropy_batch_chunked(input, linear_weight, target, linear_bias?,
        weight?, reduction, ignore_index, label_smoothing, batch_chunk_size, acc_policy,
        acc_dtype, allow_retain_graph, compute_input_grad, compute_linear_weight_grad,
        compute_linear_bias_grad) -> (loss, grad_input, grad_linear_weight, grad_linear_bias)
        "mean"/"sum": the forward returns the gradients for a unit upstream gradient; torch's
        autograd formula multiplies them by the upstream gradient (in place unless
        allow_retain_graph).
    torch_nn::_linear_cross_entropy_batch_chunked_no_reduction(input, linear_weight, target,
        linear_bias?, weight?, ignore_index, batch_chunk_size, acc_policy, acc_dtype) -> loss
        "none": the per-row loss; its autograd formula recomputes the gradients in the backward.

`enable()` registers, with torch.library's documented API, our kernels for both on CPU and
on PrivateUse1 (the NPU): `torch.library.register_kernel` for the forwards and
`torch.library.register_autograd` for the "none" op's backward (torch's formula calls its
Python accumulator directly, which no kernel registration reaches). `disable()` turns them
off again: the kernels through `set_kernel_enabled(device, False)`, the "none" backward by
registering torch's own formula back. Both are idempotent; `status()` says what is on.

What our kernels serve, on each op's whole contract: input, linear_weight (and linear_bias)
of one dtype, bfloat16 or float16 (and float32 on CPU), accumulated in float32 whatever
acc_dtype asks (every acc_policy, whose choices only trade torch's own buffers), class
weights, the bias and its gradient, ignore_index, the compute_* flags (a gradient not asked
for is not computed) and allow_retain_graph (kept by torch's formula). acc_dtype float32 is
what torch's "auto" picks on CPU (and CUDA) for half inputs; on an NPU it picks the input's
own dtype (torch 2.13's LinearCrossEntropyOptions._resolve_auto_acc_dtype knows no other
device), so there a half acc_dtype equal to the input's is served too, with more precision
than it asks. batch_chunk_size is not followed: our kernels bound their memory themselves.
Anything else (a half acc_dtype on CPU, float64, mixed dtypes, an option set the NPU route
cannot run) goes to torch's own body, with a warning (UserWarning) once per reason.

A call runs on linear_cross_entropy's own routes (routes.forward_backward, below autograd),
checked by its checks; an argument they refuse raises the RuntimeError torch's body raises
for it, naming torch's arguments (`linear_weight`, `weight` for the class weights, a target
out of [0, V)). The "none" backward is an op with a fake kernel
(ascend_ops::linear_cross_entropy_none_backward), so torch.compile traces it.

The ops are private: `enable()` compares their schemas with the ones this module was
written against and, if either differs (or torch lacks them), leaves torch alone and warns
why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import warnings

import torch

from . import routes
from .call import MEMORY_SAVING
from .checks import CPU_LCE_DTYPES, LCE_DTYPES, make_call

__all__ = ["enable", "disable", "status", "SCHEMAS"]

CHUNKED = "torch_nn::_linear_cross_entropy_batch_chunked"
NO_REDUCTION = "torch_nn::_linear_cross_entropy_batch_chunked_no_reduction"
#: The schemas of torch 2.13.0 that our kernels implement.
SCHEMAS = {
    CHUNKED: (f"{CHUNKED}(Tensor input, Tensor linear_weight, Tensor target, Tensor? linear_bias, "
              "Tensor? weight, str reduction, SymInt ignore_index, float label_smoothing, "
              "SymInt batch_chunk_size, str acc_policy, ScalarType acc_dtype, "
              "bool allow_retain_graph, bool compute_input_grad, bool compute_linear_weight_grad, "
              "bool compute_linear_bias_grad) -> (Tensor, Tensor, Tensor, Tensor)"),
    NO_REDUCTION: (f"{NO_REDUCTION}(Tensor input, Tensor linear_weight, Tensor target, "
                   "Tensor? linear_bias, Tensor? weight, SymInt ignore_index, "
                   "SymInt batch_chunk_size, str acc_policy, ScalarType acc_dtype) -> Tensor"),
}

_state = {"registered": set(), "disabled": {}, "autograd": None}
_warned: set[str] = set()
#: Calls served by our kernels and handed to torch's body since import (tests, benchmarks).
calls = {"ours": 0, "torch": 0}


def _hand_to_torch(reason: str) -> None:
    """Count a call handed to torch's body; warn once per reason (the caller believes our
    kernels run, so the hand-over must be seen)."""
    calls["torch"] += 1
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"ascend_ops: torch's linear_cross_entropy runs its own body, not our "
                      f"kernels: {reason}", UserWarning, stacklevel=2)


def _device_types() -> list[str]:
    """CPU, and the PrivateUse1 backend under its current name ("npu" with torch_npu)."""
    return ["cpu", torch._C._get_privateuse1_backend_name()]


def _opdefs():
    """(the CustomOpDef of each op, None) or (None, why we leave torch alone)."""
    try:
        from torch.nn.modules import linear_cross_entropy as module
        from torch._library.custom_ops import CustomOpDef
    except ImportError as error:
        return None, f"torch has no chunked linear_cross_entropy ({error})"
    defs = {CHUNKED: getattr(module, "_linear_cross_entropy_batch_chunked", None),
            NO_REDUCTION: getattr(module, "_linear_cross_entropy_batch_chunked_no_reduction", None)}
    for name, opdef in defs.items():
        if not isinstance(opdef, CustomOpDef):
            return None, f"{name} is not the custom op this version of ascend_ops knows"
        schema = str(opdef._opoverload._schema)
        if schema != SCHEMAS[name]:
            return None, (f"{name} has the schema {schema!r}, not the one our kernels "
                          f"implement ({SCHEMAS[name]!r})")
    return (defs, module), None


def enable() -> bool:
    """Run torch's chunked linear_cross_entropy on our kernels (CPU and NPU), accumulating
    in float32 (on an NPU also where torch's defaults ask for the input's half dtype).
    Returns True when they are on; False (and a warning saying why) when torch's ops are
    not the ones our kernels implement, in which case torch is left alone. A call our
    kernels cannot serve runs torch's body, with a warning once per reason."""
    found, why = _opdefs()
    if found is None:
        warnings.warn(f"ascend_ops leaves torch's linear_cross_entropy alone: {why}",
                      UserWarning, stacklevel=2)
        return False
    (defs, module) = found
    for device in _device_types():
        for name, kernel in ((CHUNKED, _chunked_kernel), (NO_REDUCTION, _no_reduction_kernel)):
            opdef = defs[name]
            key = (name, device)
            if key not in _state["registered"]:
                torch.library.register_kernel(name, device, kernel)
                _state["registered"].add(key)
            disabled = _state["disabled"].pop(key, None)
            if disabled is not None:  # re-enable: leave the disabling context
                disabled.__exit__(None, None, None)
    if _state["autograd"] is None:
        original = (module._linear_cross_entropy_batch_chunked_no_reduction_backward,
                    module._linear_cross_entropy_batch_chunked_no_reduction_setup_context)
        torch.library.register_autograd(NO_REDUCTION, _no_reduction_backward,
                                        setup_context=original[1])
        _state["autograd"] = original
    return True


def disable() -> None:
    """torch's own bodies again, for both ops on every device."""
    found, _ = _opdefs()
    if found is None:
        return
    defs, _module = found
    for (name, device) in sorted(_state["registered"]):
        key = (name, device)
        if key not in _state["disabled"]:
            context = defs[name].set_kernel_enabled(device, False)
            context.__enter__()
            _state["disabled"][key] = context
    if _state["autograd"] is not None:
        backward, setup_context = _state["autograd"]
        torch.library.register_autograd(NO_REDUCTION, backward, setup_context=setup_context)
        _state["autograd"] = None


def status() -> dict[str, bool]:
    """{op: whether our kernels serve it (on every device they are registered for)}."""
    return {name: any(n == name for n, _ in _state["registered"])
            and not any(n == name for n, _ in _state["disabled"]) for name in SCHEMAS}


# ---------------------------------------------------------------------------------------
# The kernels.


def _refusal(input, linear_weight, linear_bias, weight, acc_dtype) -> str | None:
    """Why our kernels cannot serve a call of these tensors (then torch's body runs), or
    None; the call's own checks (make_call) come after."""
    device = input.device.type
    allowed = CPU_LCE_DTYPES if device == "cpu" else LCE_DTYPES
    if input.dtype not in allowed:
        return f"input dtype {input.dtype} on {device}"
    if input.dim() != 2:
        return f"a {input.dim()}-D input"
    if linear_weight.dtype != input.dtype or (linear_bias is not None
                                              and linear_bias.dtype != input.dtype):
        return "linear_weight or linear_bias of another dtype than input"
    # On the PrivateUse1 device (the NPU) torch's "auto" resolves acc_dtype to the input's
    # dtype; our float32 accumulation is more than that asks.
    npu_default = device == torch._C._get_privateuse1_backend_name() and acc_dtype == input.dtype
    if acc_dtype != torch.float32 and not npu_default:
        return f"acc_dtype {acc_dtype} on {device} (our kernels accumulate in float32)"
    if weight is not None and not weight.dtype.is_floating_point:
        return f"class weight of dtype {weight.dtype}"
    return None


def _route(input, linear_weight, target, linear_bias, weight, reduction, ignore_index,
           wants):
    """(the route "auto" takes, the checked call), or (None, why it cannot run here)."""
    call = make_call(input, linear_weight, target, linear_bias=linear_bias, ce_weight=weight,
                     ignore_index=ignore_index, reduction=reduction, label_smoothing=0.0,
                     logit_scale=1.0, softcap=None, lse_square_scale=0.0, return_z_loss=False,
                     return_lse=False, return_token_accuracy=False, process_group=None,
                     vocab_start_index=0, mode=MEMORY_SAVING)
    call = dataclasses.replace(call, needs_grad=any(wants))
    route = routes.choose(call)
    why = routes.why_not(route, call)
    return (route, call) if why is None else (None, why)


def _ours(input, linear_weight, target, linear_bias, weight, reduction, ignore_index, wants,
          upstream=None):
    """(loss, grad_input, grad_linear_weight, grad_linear_bias) of linear_cross_entropy on
    our kernels for the upstream gradient `upstream` (1 when None), or None where its
    route cannot run here (torch's body runs then); a gradient not in `wants` is None.
    A bad argument raises torch's RuntimeError in the terms of torch's call."""
    with _torch_errors(linear_weight.size(0), ignore_index):
        route, call = _route(input, linear_weight, target, linear_bias, weight, reduction,
                             ignore_index, wants)
        if route is None:
            _hand_to_torch(call)
            return None
        calls["ours"] += 1
        return routes.forward_backward(route, call, wants, upstream)


@contextlib.contextmanager
def _torch_errors(vocab: int, ignore_index: int):
    """Our checks' TypeError / ValueError as the RuntimeError torch's body raises for the same
    call, naming torch's arguments (linear_weight, weight: the class weights)."""
    try:
        yield
    except (TypeError, ValueError) as error:
        raise RuntimeError(_in_torch_terms(str(error), vocab, ignore_index)) from error


_OUT_OF_RANGE = re.compile(r"'target' must be a vocabulary id held by exactly one shard "
                           r"\(or ignore_index=-?\d+\), got target\[(\d+)\] = (-?\d+) held by "
                           r"\d+ shards")


def _in_torch_terms(message: str, vocab: int, ignore_index: int) -> str:
    """A linear_cross_entropy message with F.linear_cross_entropy's argument names (one
    device: a target is a class index, not a shard's)."""
    message = (message.replace("'ce_weight'", "\0").replace("'weight'", "'linear_weight'")
               .replace("\0", "'weight'").replace(" (this shard's classes)", ""))
    return _OUT_OF_RANGE.sub(
        lambda m: (f"'target' must be a class index in [0, {vocab}) or ignore_index="
                   f"{ignore_index}, got target[{m.group(1)}] = {m.group(2)}"), message)


def _chunked_kernel(input, linear_weight, target, linear_bias, weight, reduction, ignore_index,
                    label_smoothing, batch_chunk_size, acc_policy, acc_dtype, allow_retain_graph,
                    compute_input_grad, compute_linear_weight_grad, compute_linear_bias_grad):
    args = (input, linear_weight, target, linear_bias, weight, reduction, ignore_index,
            label_smoothing, batch_chunk_size, acc_policy, acc_dtype, allow_retain_graph,
            compute_input_grad, compute_linear_weight_grad, compute_linear_bias_grad)
    why = _refusal(input, linear_weight, linear_bias, weight, acc_dtype)
    if why is None and (reduction not in ("mean", "sum") or label_smoothing != 0.0):
        why = f"reduction {reduction!r} with label_smoothing {label_smoothing}"
    wants = (compute_input_grad, compute_linear_weight_grad,
             compute_linear_bias_grad and linear_bias is not None)
    served = None
    if why is None:
        served = _ours(input, linear_weight, target, linear_bias, weight, reduction,
                       ignore_index, wants)
    else:
        _hand_to_torch(why)
    if served is None:
        return _torch_body(CHUNKED)(*args)
    loss, gi, gw, gb = served
    dtype = input.dtype
    # torch's shapes for what was not computed: rank-matching empties (its fake kernel too)
    gi = gi if gi is not None else input.new_empty((0, 0))
    gw = gw if gw is not None else input.new_empty((0, 0))
    gb = gb if gb is not None else input.new_empty((0,))
    return loss.to(dtype), gi.to(dtype), gw.to(dtype), gb.to(dtype)


def _no_reduction_kernel(input, linear_weight, target, linear_bias, weight, ignore_index,
                         batch_chunk_size, acc_policy, acc_dtype):
    why = _refusal(input, linear_weight, linear_bias, weight, acc_dtype)
    served = None
    if why is None:
        served = _ours(input, linear_weight, target, linear_bias, weight, "none", ignore_index,
                       (False, False, False))
    else:
        _hand_to_torch(why)
    if served is None:
        return _torch_body(NO_REDUCTION)(input, linear_weight, target, linear_bias, weight,
                                         ignore_index, batch_chunk_size, acc_policy, acc_dtype)
    return served[0].to(input.dtype)


def _no_reduction_backward(ctx, grad_output):
    """The "none" op's backward on our kernels (torch's formula where we refuse). The
    decision reads only types and shapes, and the work is an op with a fake kernel
    (none_backward below), so that AOTAutograd traces it."""
    from torch.nn.modules import linear_cross_entropy as module

    input, linear_weight, target, linear_bias, weight = ctx.saved_tensors
    if _state["autograd"] is None:
        return module._linear_cross_entropy_batch_chunked_no_reduction_backward(ctx, grad_output)
    needs = ctx.needs_input_grad
    wants = (needs[0], needs[1], linear_bias is not None and needs[3])
    if not any(wants):
        return (None,) * 9
    why = _refusal(input, linear_weight, linear_bias, weight, ctx._acc_dtype)
    if why is None:
        with _torch_errors(linear_weight.size(0), ctx._ignore_index):
            route, call = _route(input, linear_weight, target, linear_bias, weight, "none",
                                 ctx._ignore_index, wants)
        why = None if route is not None else call
    if why is not None:
        _hand_to_torch(why)
        return module._linear_cross_entropy_batch_chunked_no_reduction_backward(ctx, grad_output)
    gi, gw, gb = none_backward(input, linear_weight, target, linear_bias, weight, grad_output,
                               ctx._ignore_index, *wants)
    return ((gi if wants[0] else None), (gw if wants[1] else None), None,
            (gb if wants[2] else None), None, None, None, None, None)


@torch.library.custom_op("ascend_ops::linear_cross_entropy_none_backward", mutates_args=())
def none_backward(input: torch.Tensor, linear_weight: torch.Tensor, target: torch.Tensor,
                  linear_bias: torch.Tensor | None, weight: torch.Tensor | None,
                  grad_output: torch.Tensor, ignore_index: int, want_input: bool,
                  want_linear_weight: bool, want_linear_bias: bool
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(grad_input, grad_linear_weight, grad_linear_bias) of the "none" op for `grad_output`
    [N] on our kernels; an empty tensor for a gradient not wanted."""
    wants = (want_input, want_linear_weight, want_linear_bias)
    served = _ours(input, linear_weight, target, linear_bias, weight, "none", ignore_index,
                   wants, upstream=grad_output.float())
    if served is None:  # _no_reduction_backward decided on the same types and shapes
        raise RuntimeError("linear_cross_entropy: our kernels refused a call they had taken")
    _, gi, gw, gb = served
    return tuple(g if g is not None else like.new_empty(0)
                 for g, like in ((gi, input), (gw, linear_weight), (gb, input)))


@none_backward.register_fake
def _(input, linear_weight, target, linear_bias, weight, grad_output, ignore_index, want_input,
      want_linear_weight, want_linear_bias):
    bias_shape = linear_bias.shape if want_linear_bias and linear_bias is not None else (0,)
    return (input.new_empty(input.shape if want_input else (0,)),
            linear_weight.new_empty(linear_weight.shape if want_linear_weight else (0,)),
            input.new_empty(bias_shape))


def _torch_body(name: str):
    """torch's own implementation of `name` (the CustomOpDef's function)."""
    found, why = _opdefs()
    if found is None:
        raise RuntimeError(why)
    return found[0][name]._init_fn
