"""Whether our Ascend C op package can take linear_cross_entropy's loss options (SPEC §7)
in the backward of the "npu-composition+custom" route (training/routes.py).

The options' backward needs, beside SPEC §1's tensors, what the CPU kernels' option stage
takes (op_plugin/csrc/cpu/cross_entropy/logit_options.h): per-row coefficients `alpha`,
`beta`, `gamma` [BT], this shard's `bias` and `class_weight` [V], and the attributes
`logit_scale` and `softcap`. An installed package says which it has in its op information
(op_impl/ai_core/tbe/config/<soc>/aic-<soc>-ops-info.json, one entry per op type, as
msopgen packages it): the inputs `inputN.name` and the `attr.list` of
AscendOpsFusedLinearCrossEntropyLossGrad. Today's package (ascendc_kernels/ascend_ops.json)
declares none of them, and this build of the NPU adapter has no entry point that passes
them: such a call is refused before any work, naming the option.
"""

from __future__ import annotations

import json
import pathlib

import torch

from . import adapter as _adapter

__all__ = ["OP_TYPE", "ADAPTER_ENTRY", "declared_names", "missing_reason", "require",
           "custom_backward"]

OP_TYPE = "AscendOpsFusedLinearCrossEntropyLossGrad"
#: The adapter function that would pass the options (none in this build).
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
    """The npu_custom backward; require() refuses every call that would reach it in this
    build."""
    adapter_module = _adapter.adapter()
    entry = getattr(adapter_module, ADAPTER_ENTRY, None)
    if entry is None:
        raise RuntimeError(f"linear_cross_entropy: the NPU adapter has no {ADAPTER_ENTRY}")
    input_grad, weight_grad, bias_grad = entry(
        x, weight, target_mask, masked_target, ctx.stats["max"], ctx.stats["sum"], alpha, beta,
        gamma, ctx.bias, ctx.class_weight, ctx.options.logit_scale, ctx.options.softcap or 0.0)
    return input_grad, weight_grad, bias_grad
