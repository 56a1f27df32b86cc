"""Whether our Ascend C op package can take linear_cross_entropy's loss options (SPEC §7),
and the call that passes them to it (the "npu-composition+custom" route's backward,
training/lce/route_npu_custom.py, says which option needs which input or attribute).

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

from . import adapter as _adapter

__all__ = ["OP_TYPE", "ADAPTER_ENTRY", "declared_names", "missing_reason",
           "unavailable_reason", "options_grads"]

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


def unavailable_reason(needs: dict[str, tuple[str, ...]]) -> str | None:
    """Why the installed op package and adapter cannot take the options `needs` ({option:
    the package names it needs}) here, naming the first; None when they can."""
    if not needs:
        return None
    package_reason = _adapter.op_unavailable_reason("npu_custom",
                                                    "fused_linear_cross_entropy_loss_grad")
    vendor = None
    module = None
    if package_reason is None:
        vendor = _adapter.find_custom_package(*_adapter.package_search_environment())
        module = _adapter.adapter()
    return missing_reason(needs, vendor, package_reason, module)


def options_grads(x, weight, target_mask, masked_target, logits_max, sum_exp_logits, alpha,
                  beta, gamma, bias, class_weight, logit_scale: float, softcap: float):
    """(input_grad, weight_grad) of our op in memory-saving mode with the options: SPEC §7's
    G = (alpha·p − beta·onehot − gamma·w)·slope of each row, through the adapter's
    ADAPTER_ENTRY (`softcap` 0 for none; `bias`, `class_weight` [V] float32 or None)."""
    entry = getattr(_adapter.adapter(), ADAPTER_ENTRY, None)
    if entry is None:
        raise RuntimeError(f"the NPU adapter has no {ADAPTER_ENTRY}")
    return entry(x, weight, target_mask, masked_target, logits_max, sum_exp_logits,
                 alpha.float().contiguous(), beta.float().contiguous(),
                 gamma.float().contiguous(), bias, class_weight, float(logit_scale),
                 float(softcap))
