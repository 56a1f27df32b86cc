"""Whether our Ascend C op package can take linear_cross_entropy's loss options (SPEC §7)
in the backward of the "npu-composition+custom" route (training/routes.py), and that
backward.

The options' backward needs, beside SPEC §1's tensors, what the CPU kernels' option stage
takes (op_plugin/csrc/cpu/cross_entropy/logit_options.h): per-row coefficients `alpha`,
`beta`, `gamma` [BT], this shard's `bias` and `class_weight` [V], and the attributes
`logit_scale` and `softcap`. Our FLCE kernel takes them in its vector stage
(ascendc_kernels/…/op_kernel/…_g_stage.h; checked on the simulator,
tests/test_ascendc_sim_options.py). An installed package says which it has in its op
information (op_impl/ai_core/tbe/config/<soc>/aic-<soc>-ops-info.json, one entry per op
type, as msopgen packages it from ascendc_kernels/ascend_ops.json): the inputs
`inputN.name` and the `attr.list` of AscendOpsFusedLinearCrossEntropyLossGrad. A package
built before the options declares none of them, and an adapter built before them has no
ADAPTER_ENTRY: such a call is refused before any work, naming the option.
"""

from __future__ import annotations

import json
import pathlib

import torch

from . import adapter as _adapter

__all__ = ["OP_TYPE", "ADAPTER_ENTRY", "declared_names", "missing_reason", "require",
           "custom_backward"]

OP_TYPE = "AscendOpsFusedLinearCrossEntropyLossGrad"
#: The adapter function that passes the options (op_plugin/csrc/npu/…LossGradKernelNpuOpApi.cpp).
ADAPTER_ENTRY = "fused_linear_cross_entropy_loss_grad_options_custom"


def declared_names(vendor: pathlib.Path, op_type: str = OP_TYPE) -> set[str]:
    """The input and attribute names the package at `vendor` declares for `op_type`, from
    every ops-info json under op_impl/ai_core/tbe/config (empty when none declares it)."""
    names: set[str] = set()
    config = vendor / "op_impl" / "ai_core" / "tbe" / "config"
    for path in sorted(config.glob("*/aic-*-ops-info.json")):
        try:
            entry = json.loads(path.read_text()).get(op_type)
        except (OSError, ValueError):
            continue
        if not isinstance(entry, dict):
            continue
        for key, value in entry.items():
            if key.startswith(("input", "output")) and isinstance(value, dict) and "name" in value:
                names.add(str(value["name"]))
        attrs = entry.get("attr", {})
        if isinstance(attrs, dict) and attrs.get("list"):
            names.update(a.strip() for a in str(attrs["list"]).split(",") if a.strip())
    return names


def missing_reason(needs: dict[str, tuple[str, ...]], vendor: pathlib.Path | None,
                   package_reason: str | None, adapter_module) -> str | None:
    """Why the npu_custom backward cannot take the options `needs` ({option: the package
    names it needs}), naming the first option; None when it can."""
    if not needs:
        return None
    first = next(iter(needs))
    if package_reason is not None:
        return f"'{first}' needs our op package and it cannot run: {package_reason}"
    declared = declared_names(vendor) if vendor is not None else set()
    for option, names in needs.items():
        lacking = [n for n in names if n not in declared]
        if lacking:
            return (f"'{option}' needs {OP_TYPE} to take {', '.join(repr(n) for n in lacking)}; "
                    f"the installed ascend_ops op package ({vendor}) does not declare "
                    f"{'it' if len(lacking) == 1 else 'them'}")
    if adapter_module is None or not hasattr(adapter_module, ADAPTER_ENTRY):
        return (f"'{first}' needs the NPU adapter's {ADAPTER_ENTRY}, which this build of "
                "ascend_ops does not have")
    return None


def require(needs: tuple[str, ...], device: torch.device) -> None:
    """Raise NotImplementedError naming the first option of `needs` that the npu_custom
    backward cannot take here (training/routes.CUSTOM_OP_NEEDS says what each needs)."""
    from ..training.routes import CUSTOM_OP_NEEDS

    wanted = {name: CUSTOM_OP_NEEDS[name] for name in needs}
    package_reason = _adapter.op_unavailable_reason("npu_custom",
                                                    "fused_linear_cross_entropy_loss_grad")
    vendor = None
    module = None
    if package_reason is None:
        vendor = _adapter.find_custom_package(*_adapter.package_search_environment())
        module = _adapter.adapter()
    reason = missing_reason(wanted, vendor, package_reason, module)
    if reason is not None:
        raise NotImplementedError(
            f"linear_cross_entropy: on {device.type} tensors the options "
            f"{', '.join(needs)} need our Ascend C op (npu_custom) in the backward, as CANN's "
            f"aclnnFusedLinearCrossEntropyLossGrad cannot express them (docs/npu.md, 'Loss "
            f"options on the NPU'): {reason}. They run on CPU tensors.")


def custom_backward(ctx, x, weight, target_mask, masked_target, alpha, beta, gamma):
    """(input_grad, weight_grad, bias_grad) of the npu_custom backward: our op in
    memory-saving mode with the options (ADAPTER_ENTRY), and the bias gradient, when it is
    wanted, from a chunked pass on the device (bias_gradient)."""
    adapter_module = _adapter.adapter()
    entry = getattr(adapter_module, ADAPTER_ENTRY, None)
    if entry is None:
        raise RuntimeError(f"linear_cross_entropy: the NPU adapter has no {ADAPTER_ENTRY}")
    options = ctx.options
    softcap = options.softcap or 0.0
    bias = ctx.bias.float().contiguous() if ctx.bias is not None else None
    class_weight = ctx.class_weight.float().contiguous() if ctx.class_weight is not None else None
    input_grad, weight_grad = entry(
        x, weight, target_mask, masked_target, ctx.stats["max"], ctx.stats["sum"],
        alpha.float().contiguous(), beta.float().contiguous(), gamma.float().contiguous(), bias,
        class_weight, float(options.logit_scale), float(softcap))
    want_x, want_w, want_b = ctx.needs_input_grad[:3]
    bias_grad = None
    if want_b and ctx.bias is not None:
        bias_grad = bias_gradient(x, weight, bias, class_weight, target_mask, masked_target,
                                  ctx.stats["max"], ctx.stats["sum"], alpha, beta, gamma,
                                  float(options.logit_scale), float(softcap)).to(ctx.bias.dtype)
    return (input_grad if want_x else None), (weight_grad if want_w else None), bias_grad


#: fp32 logits of one row chunk of bias_gradient, at most.
BIAS_CHUNK_BYTES = 48 << 20


def bias_gradient(x, weight, bias, class_weight, target_mask, masked_target, logits_max,
                  sum_exp_logits, alpha, beta, gamma, logit_scale, softcap):
    """dL/dbias [V] (fp32) = the column sums of dL/draw, SPEC §7's G before its cast, by
    row chunks of logits on the device (never [BT, V]): the kernel's vector stage in torch.
    It costs one more x·Wᵀ; the kernel has no output for it."""
    from ..training.options_device import fp32_logits

    bt, vocab = x.size(0), weight.size(0)
    out = torch.zeros(vocab, dtype=torch.float32, device=x.device)
    step = max(1, min(max(bt, 1), BIAS_CHUNK_BYTES // max(1, 4 * vocab)))
    kept = ~target_mask if target_mask.dtype == torch.bool else None
    if kept is None:  # the bit-packed form: bit i of byte i / 8
        bits = torch.arange(8, device=x.device)
        kept = ~(((target_mask[:, None].long() >> bits) & 1).bool().reshape(-1)[:bt])
    for r0 in range(0, bt, step):
        rs = slice(r0, min(bt, r0 + step))
        y = fp32_logits(x[rs], weight) + bias
        y = y * logit_scale
        t = None
        if softcap:
            t = torch.tanh(y / softcap)
            y = softcap * t
        p = torch.exp(y - logits_max[rs, None]) / sum_exp_logits[rs, None]
        dy = alpha[rs, None].float() * p
        rows = torch.nonzero(kept[rs]).flatten()
        dy[rows, masked_target[rs][rows].long()] -= beta[rs][rows].float()
        w = class_weight if class_weight is not None else 1.0
        dy = dy - gamma[rs, None].float() * w
        if t is not None:
            dy = dy * (1 - t * t)
        out += (dy * logit_scale).sum(dim=0)
    return out
