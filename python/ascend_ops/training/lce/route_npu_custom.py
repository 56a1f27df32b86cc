"""The backward of the "npu-composition+custom" route: our Ascend C op (npu_custom) with the
loss options CANN's aclnnFusedLinearCrossEntropyLossGrad cannot express, as inputs and
attributes of its vector stage, in memory-saving mode; the bias gradient from a chunked
pass on the device (the op has no output for it).

What each option needs the installed op package to declare is CUSTOM_OP_NEEDS; the package
and the adapter are read by npu/options_support.py, which talks to CANN. A call whose
options the installed package cannot take is refused before any work, naming the option.
"""

from __future__ import annotations

import torch

from ...npu import options_support as _support
from .call import LceCall, LossOptions
from .logits import fp32_logits, logits_grad_to_raw, transform_logits

__all__ = ["CUSTOM_OP_NEEDS", "CANN_EXPRESSES", "BIAS_CHUNK_BYTES", "needs", "why_not",
           "backward", "bias_gradient"]

#: The op package's inputs and attributes each option needs, by option name.
CUSTOM_OP_NEEDS = {
    "linear_bias": ("bias",),
    "logit_scale": ("logit_scale",),
    "softcap": ("softcap",),
    "label_smoothing": ("gamma",),
    "lse_square_scale": ("alpha", "beta"),
    "ce_weight": ("class_weight",),  # with label_smoothing: its gamma term is per class
}

#: The options CANN's own backward expresses (class weights only scale a row's gradient)
#: or that need nothing of it (an argmax, computed in the forward).
CANN_EXPRESSES = ("ce_weight", "return_token_accuracy")


def needs(call: LceCall) -> tuple[str, ...]:
    """The options of `call` the npu_custom backward must be given, in CUSTOM_OP_NEEDS' names."""
    names = [name for name in call.active_options() if name not in CANN_EXPRESSES]
    if names and call.has_class_weight and call.options.label_smoothing != 0.0:
        names.append("ce_weight")
    return tuple(names)


def why_not(call: LceCall) -> str | None:
    """Why the installed op package (or adapter) cannot take this call's options, or None."""
    wanted = needs(call)
    if not wanted:  # plain cross entropy: still our op package and the adapter's entry
        reason = _support.unavailable_reason({"npu_custom": ()})
        return None if reason is None else f"runs our Ascend C op in the backward: {reason}"
    reason = _support.unavailable_reason({name: CUSTOM_OP_NEEDS[name] for name in wanted})
    if reason is None:
        return None
    return (f"on {call.input.device.type} tensors the options {', '.join(wanted)} need our "
            f"Ascend C op (npu_custom) in the backward, as CANN's "
            f"aclnnFusedLinearCrossEntropyLossGrad cannot express them (docs/npu.md, 'Loss "
            f"options on the NPU'): {reason}. They run on CPU tensors")


def backward(x, weight, bias, class_weight, target_mask, masked_target, stats,
             options: LossOptions, alpha, beta, gamma, wants):
    """(input_grad, weight_grad, bias_grad), None for what is not wanted."""
    want_x, want_w, want_b = wants
    bias32 = bias.float().contiguous() if bias is not None else None
    cw32 = class_weight.float().contiguous() if class_weight is not None else None
    input_grad, weight_grad = _support.options_grads(
        x, weight, target_mask, masked_target, stats["max"], stats["sum"], alpha, beta, gamma,
        bias32, cw32, options.logit_scale, options.softcap_or_zero)
    bias_grad = None
    if want_b and bias is not None:
        bias_grad = bias_gradient(x, weight, bias32, cw32, target_mask, masked_target, stats,
                                  options, alpha, beta, gamma).to(bias.dtype)
    return (input_grad if want_x else None), (weight_grad if want_w else None), bias_grad


#: fp32 logits of one row chunk of bias_gradient, at most.
BIAS_CHUNK_BYTES = 48 << 20


def bias_gradient(x, weight, bias32, class_weight32, target_mask, masked_target, stats,
                  options: LossOptions, alpha, beta, gamma):
    """dL/dbias [V] (fp32) = the column sums of dL/draw, SPEC §7's G before its cast, by
    row chunks of logits on the device (never [BT, V]): the kernel's vector stage in torch.
    It costs one more x·Wᵀ. The onehot term is a scatter-add of beta, 0 on the rows the
    mask drops: nothing here depends on the data's values for its shapes, so nothing waits
    for the device."""
    bt, vocab = x.size(0), weight.size(0)
    out = torch.zeros(vocab, dtype=torch.float32, device=x.device)
    if bt == 0 or vocab == 0:
        return out
    step = max(1, min(bt, BIAS_CHUNK_BYTES // (4 * vocab)))
    if target_mask.dtype == torch.bool:
        masked = target_mask
    else:  # the bit-packed form: bit i % 8 of byte i / 8
        bits = torch.arange(8, device=x.device)
        masked = ((target_mask[:, None].long() >> bits) & 1).bool().reshape(-1)[:bt]
    onehot_scale = torch.where(masked, 0.0, beta.float())  # [BT]
    columns = masked_target.long().clamp(0, vocab - 1)     # any column where the scale is 0
    w = class_weight32 if class_weight32 is not None else 1.0
    for r0 in range(0, bt, step):
        rs = slice(r0, min(bt, r0 + step))
        y, tanh = transform_logits(fp32_logits(x[rs], weight), bias32, options)  # chunk x V
        p = torch.exp(y - stats["max"][rs, None]) / stats["sum"][rs, None]
        dy = alpha[rs, None].float() * p
        dy.scatter_add_(1, columns[rs, None], -onehot_scale[rs, None])
        dy = dy - gamma[rs, None].float() * w
        out += logits_grad_to_raw(dy, tanh, options).sum(dim=0)
    return out
