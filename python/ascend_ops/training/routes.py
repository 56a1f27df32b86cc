"""Which implementation runs a linear_cross_entropy call, by device and option set
(SPEC §7; docs/npu.md "Loss options on the NPU").

    route             when                                       forward                backward
    fused-plain       no option (plain cross entropy), half       the SPEC §3 operators  SPEC §1 operator
                      dtypes, any device                          (or, on CPU bfloat16, the logits-gradient cache)
    cpu-options       any option, or float32, on CPU              lce_options kernels    lce_options kernels
    npu-operators     on an accelerator, only options CANN can    SPEC §3 operators      SPEC §1 operator with
                      express: ce_weight, return_lse,                                    per-row grad a·w[t]
                      return_z_loss (lse_square_scale 0)
    npu-composition   as npu-operators, plus return_token_        chunked torch on the   SPEC §1 operator
      +operators      accuracy (CANN's forward has no argmax)     device (never [BT, V])
    npu-composition   on an accelerator, any option CANN cannot  chunked torch on the   our Ascend C op
      +custom         express (linear_bias, logit_scale,          device                 (npu_custom) with the
                      softcap, label_smoothing, lse_square_scale)                        options as inputs and attributes

CANN's aclnnFusedLinearCrossEntropyLossGrad computes G = (softmax − onehot)·grad per row
(labelSmoothing must be 0): class weights only scale a row's gradient (grad = a·w[t]), so
they fit; a bias, scale or soft-cap changes the logits it recomputes, and smoothing and
z-loss add terms it does not have. The last route needs our op package to take them
(npu/options_support.py reads what the installed package declares); when it does not,
the call fails before any work with an error naming the option. Nothing falls back to
the full [BT, V] logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .lce_options import LossOptions

__all__ = ["Route", "choose", "run", "ROUTES"]

FUSED_PLAIN = "fused-plain"
CPU_OPTIONS = "cpu-options"
NPU_OPERATORS = "npu-operators"
NPU_COMPOSITION_OPERATORS = "npu-composition+operators"
NPU_COMPOSITION_CUSTOM = "npu-composition+custom"
ROUTES = (FUSED_PLAIN, CPU_OPTIONS, NPU_OPERATORS, NPU_COMPOSITION_OPERATORS,
          NPU_COMPOSITION_CUSTOM)

#: The options the npu_custom backward needs the op package to take, by option name.
CUSTOM_OP_NEEDS = {
    "linear_bias": ("bias",),
    "logit_scale": ("logit_scale",),
    "softcap": ("softcap",),
    "label_smoothing": ("gamma",),
    "lse_square_scale": ("alpha", "beta"),
    "ce_weight": ("class_weight",),  # with label_smoothing: its gamma term is per class
}


@dataclass(frozen=True)
class Route:
    name: str
    forward: str   # "operators", "cpu-kernels" or "composition"
    backward: str  # "operators", "cpu-kernels" or "npu_custom"
    needs: tuple[str, ...] = ()  # the options the npu_custom backward must be given

    @property
    def fused_plain(self) -> bool:
        return self.name == FUSED_PLAIN


def choose(device: torch.device, dtype: torch.dtype, options: LossOptions, has_bias: bool,
           has_class_weight: bool) -> Route:
    """The route of a call (the table above). Pure: decided from types and option values."""
    plain = options.plain(has_bias, has_class_weight)
    if device.type == "cpu":
        if plain and not options.returns_extra and dtype != torch.float32:
            return Route(FUSED_PLAIN, "operators", "operators")
        return Route(CPU_OPTIONS, "cpu-kernels", "cpu-kernels")
    if plain and not options.returns_extra:
        return Route(FUSED_PLAIN, "operators", "operators")
    beyond = [name for name in options.active(has_bias, has_class_weight)
              if name not in ("ce_weight", "return_token_accuracy")]
    if not beyond:
        if options.return_token_accuracy:
            return Route(NPU_COMPOSITION_OPERATORS, "composition", "operators")
        return Route(NPU_OPERATORS, "operators", "operators")
    needs = list(beyond)
    if has_class_weight and options.label_smoothing != 0.0:
        needs.append("ce_weight")
    return Route(NPU_COMPOSITION_CUSTOM, "composition", "npu_custom", tuple(needs))


# The option paths call _C's kernels (CPU) or read option values in Python: under
# torch.compile they run eagerly, a graph break (the plain path's custom ops are traced).
@torch.compiler.disable
def run(route: Route, x, weight, bias, rows, ce_weight, options, ignore_index, reduction,
        group, start, mode, needs_grad, shape):
    """(loss, z_loss, lse, token_accuracy) of a call on `route` (not fused-plain, which
    vocab_parallel runs itself)."""
    if route.name == CPU_OPTIONS:
        from .options_cpu import options_linear_cross_entropy

        return options_linear_cross_entropy(x, weight, bias, rows, ce_weight, options,
                                            ignore_index, reduction, group, start, mode,
                                            needs_grad, shape)
    from .options_device import device_linear_cross_entropy

    return device_linear_cross_entropy(route, x, weight, bias, rows, ce_weight, options,
                                       ignore_index, reduction, group, start, needs_grad,
                                       shape)
