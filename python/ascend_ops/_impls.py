"""Which implementation runs a call: the `impl=` option and `available_impls()`."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import _extension, _npu_adapter, _sim

__all__ = ["ImplStatus", "available_impls", "IMPLS"]

#: Every implementation this version knows, in the order "auto" prefers them.
#: "cpu": the C++ kernel. "npu": the aclnn adapter through torch_npu (op_plugin/csrc/npu).
#: "reference": plain torch (reference.py), the oracle.
#: "sim": the Ascend C kernels on the project's CPU simulator (ascendc_kernels/).
IMPLS = ("cpu", "npu", "reference", "sim")

#: The implementations of each operator. The Ascend C kernels (sim) and the NPU adapter
#: cover the two backward operators; the forward companions run on cpu and reference.
BACKWARD_IMPLS = IMPLS
FORWARD_IMPLS = ("cpu", "reference")
OP_IMPLS = {
    "fused_linear_cross_entropy_loss_grad": BACKWARD_IMPLS,
    "batch_norm_reduce_backward": BACKWARD_IMPLS,
    "fused_linear_online_max_sum": FORWARD_IMPLS,
    "fused_cross_entropy_loss_with_max_sum": FORWARD_IMPLS,
}


@dataclass(frozen=True)
class ImplStatus:
    """Whether an implementation can run on this machine, and if not, why."""

    available: bool
    reason: str | None = None


def available_impls() -> dict[str, ImplStatus]:
    """For each known implementation, whether it can run here and, if not, why."""
    status = {name: ImplStatus(True) for name in IMPLS}
    if _sim.load_error is not None:
        status["sim"] = ImplStatus(False, _sim.load_error)
    if _extension.load_error is not None:
        # cpu and npu are kernels registered by _C. The reference (plain torch) and sim (its
        # own library) still run: their checks have a Python statement (_validation.py).
        down = ImplStatus(False, f"needs the native library: {_extension.load_error}")
        return {**status, "cpu": down, "npu": down}
    npu_reason = _npu_adapter.unavailable_reason()
    if npu_reason is not None:
        status["npu"] = ImplStatus(False, npu_reason)
    return status


def resolve(impl: str, device: torch.device, op: str) -> str:
    """The implementation of `op` to run for `impl` on tensors of `device`; raises if it
    cannot run."""
    if impl != "auto" and impl not in IMPLS:
        raise ValueError(f"impl must be 'auto' or one of {IMPLS}, got {impl!r}")
    mine = OP_IMPLS[op]
    if impl != "auto" and impl not in mine:
        raise ValueError(f"impl={impl!r} does not implement {op}; its implementations are {mine}")
    status = available_impls()
    if impl == "auto":
        if device.type == "cpu" and status["cpu"].available:
            return "cpu"
        if (device.type in _npu_adapter.NPU_DEVICE_TYPES and "npu" in mine
                and status["npu"].available):
            return "npu"
        reasons = "; ".join(f"{name}: {why_not(name, device, status[name])}" for name in mine)
        raise RuntimeError(f"impl='auto': no implementation of {op} runs on {device} tensors "
                           f"({reasons})")
    if not status[impl].available:
        raise RuntimeError(f"impl={impl!r} is not available: {status[impl].reason}")
    if impl in ("cpu", "sim") and device.type != "cpu":
        raise ValueError(f"impl={impl!r} needs CPU tensors, got tensors on {device}")
    if impl == "npu" and device.type not in _npu_adapter.NPU_DEVICE_TYPES:
        raise ValueError(f"impl='npu' needs NPU tensors, got tensors on {device}")
    return impl


def why_not(name: str, device: torch.device, status: ImplStatus) -> str:
    if not status.available:
        return status.reason or "unavailable"
    if name == "cpu":
        return f"needs CPU tensors, got {device}"
    if name == "sim":
        return "never chosen by 'auto' (a simulator for testing the Ascend C kernels; ask for impl='sim')"
    if name == "npu":
        return f"needs NPU tensors, got {device}"
    return "never chosen by 'auto' (the oracle; ask for it with impl='reference')"
