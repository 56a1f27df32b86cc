"""What CANN's built-ins are documented to refuse or to compute differently (README,
"Differences from the NPU built-ins"), as the parity tables accept it.

A parity row of `python -m ascend_ops` or scripts/parity.py runs sample and edge cases on
every implementation. On the NPU implementations two outcomes are documented, and are
reported as such instead of as failures:

- a refusal: CANN's built-in aclnnFusedLinearCrossEntropyLossGrad cannot take the shape
  (limits.py: H > 65535 in both modes; V < 128 (its phase 1,
  aclnn_fused_linear_cross_entropy_loss_grad.cpp:177), V past the UB's rows or BT > 65536
  in high-performance mode), and impl="npu" refuses it up front with a NotImplementedError
  naming the limit; torch_npu's own operator refuses V < 128 in both modes (its doc);
- a known difference: CANN's built-in aclnnBatchNormReduceBackward forms Σ dy·(x − mean)
  as Σ dy·x − mean·Σ dy in float32 (aclnn_batch_norm_backward_reduce.cpp:375, :427),
  which cancels where |mean| >> std: the sample case with mean_offset=1000 (unit spread)
  lies about 1e-3 off, outside SPEC §4's float32 bound, on impl="npu" and torch_npu's own
  operator. nn.SyncBatchNorm centres its input first and is not affected.

Anything else an NPU implementation raises, or a disagreement on any other case, is a
failure.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from . import limits

__all__ = ["Refusal", "KnownDifference", "documented_refusal", "known_difference",
           "DOCUMENTED_REFUSALS", "KNOWN_DIFFERENCES"]

HIGH_PERFORMANCE = "high-performance"

#: The start of the message with which impl="npu" refuses a shape of CANN's built-in FLCE
#: backward up front (op_plugin/csrc/npu/builtin_limits.cpp).
BUILTIN_REFUSAL_PREFIX = "fused_linear_cross_entropy_loss_grad: CANN's built-in"


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A case `impls` are documented to refuse: `applies(case)` says which; `prefix`, when
    given, is how the error message must start (else any error is the refusal)."""

    impls: tuple[str, ...]
    applies: Callable
    limit: str
    prefix: str | None = None
    error: type = Exception

    def matches(self, error: BaseException) -> bool:
        first_line = str(error).splitlines()[0] if str(error) else ""
        return isinstance(error, self.error) and (self.prefix is None or first_line.startswith(self.prefix))


@dataclasses.dataclass(frozen=True)
class KnownDifference:
    """A case on which `impls` are documented to lie outside SPEC §4's bounds."""

    impls: tuple[str, ...]
    applies: Callable
    why: str


def _builtin_refusal(case) -> str | None:
    return limits.builtin_flce_grad_refusal(case.bt, case.h, case.v, case.mode == HIGH_PERFORMANCE)


def _package_refusal(case) -> bool:
    return case.bt > 0 and (case.h > 65535 or (case.mode == HIGH_PERFORMANCE and case.v > 1 << 20))


#: Every refusal the parity tables accept, per operator (cases are ascend_ops.testing's).
DOCUMENTED_REFUSALS: dict[str, list[Refusal]] = {
    "fused_linear_cross_entropy_loss_grad": [
        Refusal(("npu",), lambda case: _builtin_refusal(case) is not None,
                "CANN's built-in refuses this shape, checked up front (ascend_ops.npu.limits)",
                BUILTIN_REFUSAL_PREFIX, NotImplementedError),
        Refusal(("torch_npu",), lambda case: _builtin_refusal(case) is not None,
                "CANN's built-in refuses this shape (ascend_ops.npu.limits)"),
        Refusal(("torch_npu",), lambda case: case.v < 128,
                "CANN's API reference states V >= 128 for both modes"),
        # Our op package (impl="sim" runs its kernel and TilingFunc): H <= 65535, and V <= 2^20
        # in high-performance mode (docs/npu.md, "Our package's limits").
        Refusal(("sim",), lambda case: _package_refusal(case), "our op package's limits (docs/npu.md)",
                "fused_linear_cross_entropy_loss_grad: the op package refuses", ValueError),
        Refusal(("npu_custom",), lambda case: _package_refusal(case), "our op package's limits (docs/npu.md)"),
    ],
}

#: Every known difference the parity tables accept, per operator.
KNOWN_DIFFERENCES: dict[str, list[KnownDifference]] = {
    "batch_norm_reduce_backward": [
        KnownDifference(("npu", "torch_npu"), lambda case: case.mean_offset != 0,
                        "CANN's built-in forms Σ dy·(x − mean) as Σ dy·x − mean·Σ dy in "
                        "float32, which cancels where |mean| >> std (README, Differences)"),
    ],
}


def documented_refusal(op: str, impl: str, case, error: BaseException | None = None) -> Refusal | None:
    """The documented refusal of `case` by `impl` (matching `error` when given), or None if
    refusing it is a failure."""
    for refusal in DOCUMENTED_REFUSALS.get(op, []):
        if impl in refusal.impls and refusal.applies(case) and (error is None or refusal.matches(error)):
            return refusal
    return None


def known_difference(op: str, impl: str, case) -> KnownDifference | None:
    """The documented difference of `impl` on `case`, or None if a disagreement is a failure."""
    for difference in KNOWN_DIFFERENCES.get(op, []):
        if impl in difference.impls and difference.applies(case):
            return difference
    return None
