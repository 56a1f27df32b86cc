"""The shape limits of CANN's built-in aclnn ops, as the NPU adapter enforces them.

Their one home is op_plugin/csrc/npu/builtin_limits.cpp, which derives each from CANN
9.0.0's host code (the tiling formula of aclnnFusedLinearCrossEntropyLossGrad with the
Unified Buffer PlatformAscendC reports on Atlas A2/A3), citing the line; it is compiled
into ascend_ops._C too, so these answers are the same on a machine without torch_npu.
The docs' tests, scripts/parity.py and tests/test_npu.py read them here.

    >>> builtin_limits()["flce_grad_high_perf_max_vocab"]
    24528
"""

from __future__ import annotations

from .._extension import native

__all__ = ["builtin_limits", "builtin_flce_grad_refusal"]


def builtin_limits() -> dict[str, int]:
    """{name: value}: ub_bytes, flce_grad_max_hidden, flce_grad_high_perf_min_vocab,
    flce_grad_high_perf_max_vocab, flce_grad_high_perf_max_rows,
    online_max_sum_max_hidden, online_max_sum_min_vocab."""
    return dict(native().cann_builtin_limits())


def builtin_flce_grad_refusal(bt: int, h: int, v: int, high_performance: bool) -> str | None:
    """The message impl="npu" raises (NotImplementedError) for [BT, H] x [V, H] before
    calling CANN's built-in FLCE backward, or None when the built-in takes the shape."""
    return native().builtin_flce_grad_refusal(bt, h, v, high_performance)
