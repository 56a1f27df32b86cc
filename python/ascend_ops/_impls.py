"""Which implementation runs a call: the `impl=` option and `available_impls()`."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import _extension
from .npu import adapter as _npu_adapter
from .sim import cann_tiling as _cann_tiling
from .sim import simulator as _sim

__all__ = ["ImplStatus", "available_impls", "IMPLS"]

#: Every implementation this version knows, in the order "auto" prefers them.
#: "cpu": the C++ kernel. "npu": the aclnn adapter through torch_npu (op_plugin/csrc/npu)
#: on CANN's built-in ops. "npu_custom": the same adapter on our Ascend C op package
#: (never chosen by "auto"). "reference": plain torch (reference.py), the oracle.
#: "sim": the Ascend C kernels on the project's CPU simulator (ascendc_kernels/).
IMPLS = ("cpu", "npu", "npu_custom", "reference", "sim")

#: The implementations of each operator. The Ascend C kernels (sim, npu_custom) cover the
#: two backward operators; the forward companions run on cpu, reference and CANN's
#: built-ins (npu).
BACKWARD_IMPLS = IMPLS
FORWARD_IMPLS = ("cpu", "npu", "reference")
NPU_IMPLS = ("npu", "npu_custom")
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


def available_impls(op: str | None = None) -> dict[str, ImplStatus]:
    """For each known implementation, whether it can run here and, if not, why.

    With `op` (e.g. "fused_linear_cross_entropy_loss_grad"), whether it can run that
    operator: an implementation lacking it says so, and "npu" / "npu_custom" check that
    the aclnn op behind it resolves (CANN's built-in / our op package). Without, "npu" and
    "npu_custom" are available only when every operator they cover resolves.
    """
    if op is not None and op not in OP_IMPLS:
        raise ValueError(f"op must be one of {tuple(OP_IMPLS)}, got {op!r}")
    status = {name: ImplStatus(True) for name in IMPLS}
    if _sim.load_error is not None:
        status["sim"] = ImplStatus(False, _sim.load_error)
    if _extension.load_error is not None:
        # cpu and the NPU implementations are kernels registered by _C. The reference
        # (plain torch) and sim (its own library) still run: their checks have a Python
        # statement (_validation.py).
        down = ImplStatus(False, f"needs the native library: {_extension.load_error}")
        status.update({name: down for name in ("cpu", *NPU_IMPLS)})
    else:
        for name in NPU_IMPLS:
            if op is None or name in OP_IMPLS[op]:
                reason = _npu_adapter.op_unavailable_reason(name, op)
                if reason is not None:
                    status[name] = ImplStatus(False, reason)
    if op == "fused_linear_cross_entropy_loss_grad" and status["sim"].available and _cann_tiling.unavailable:
        # The simulator runs FLCE only with the tiling its CANN TilingFunc produces.
        status["sim"] = ImplStatus(False, _cann_tiling.unavailable)
    if op is not None:
        for name in IMPLS:
            if name not in OP_IMPLS[op]:
                status[name] = ImplStatus(False, f"{name} does not implement {op}")
    return status


def resolve(impl: str, device: torch.device, op: str) -> str:
    """The implementation of `op` to run for `impl` on tensors of `device`; raises if it
    cannot run."""
    if impl in ("auto", "cpu") and device.type == "cpu" and _extension.load_error is None:
        # The common case, answered without available_impls() (~12 us a call): the C++
        # kernel is there, and every operator has a cpu implementation.
        return "cpu"
    if impl != "auto" and impl not in IMPLS:
        raise ValueError(f"impl must be 'auto' or one of {IMPLS}, got {impl!r}")
    mine = OP_IMPLS[op]
    if impl != "auto" and impl not in mine:
        raise ValueError(f"impl={impl!r} does not implement {op}; its implementations are {mine}")
    status = available_impls(op)
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
        if impl == "sim" and status[impl].reason == _cann_tiling.unavailable:
            raise _cann_tiling.CannTilingUnavailable(f"impl='sim' cannot run {op}: {_cann_tiling.unavailable}")
        raise RuntimeError(f"impl={impl!r} is not available: {status[impl].reason}")
    if impl in ("cpu", "sim") and device.type != "cpu":
        raise ValueError(f"impl={impl!r} needs CPU tensors, got tensors on {device}")
    if impl in NPU_IMPLS and device.type not in _npu_adapter.NPU_DEVICE_TYPES:
        raise ValueError(f"impl={impl!r} needs NPU tensors, got tensors on {device}")
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
    if name == "npu_custom":
        return "never chosen by 'auto' (our Ascend C op package; ask for impl='npu_custom')"
    return "never chosen by 'auto' (the oracle; ask for it with impl='reference')"
