"""The FLCE op's TilingFunc, run on the host against CANN's own Matmul tiling library.

`ascend_ops._cann_flce_tiling` (setup.py, ascendc_kernels/cann_host) is
ascendc_kernels/fused_linear_cross_entropy_loss_grad/op_host/*_def.cpp as shipped,
compiled against asc-devkit's host Matmul tiling (CANN 9.0.0, built by
../shared/tools/cann-matmul-tiling) and our TilingContext stand-in. `flce_tiling` calls
its registered TilingFunc once; impl="sim" runs the kernel with the tiling data it
returns. Without the tool the library is not built and `unavailable` says why.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import pathlib
from dataclasses import dataclass

__all__ = ["CannTilingUnavailable", "unavailable", "FlceTilingFuncResult", "flce_tiling", "SOCS",
           "cann_flce_workspace_bytes"]

#: The SoCs the op package targets (the OpDef's ascend910b and ascend910_93), as the tool's table names them.
SOCS = ("Ascend910B", "Ascend910_93")
GRAPH_SUCCESS = 0


class CannTilingUnavailable(RuntimeError):
    """The host TilingFunc library was not built (no CANN Matmul tiling tool at build time)."""


class _Request(ctypes.Structure):
    """CannFlceRequest (ascendc_kernels/cann_host/flce_tiling_host.cpp)."""
    _fields_ = [("bt", ctypes.c_uint64), ("h", ctypes.c_uint64), ("v", ctypes.c_uint64), ("dtype", ctypes.c_uint32),
                ("inputs", ctypes.c_uint32), ("target64", ctypes.c_int32), ("labelSmoothing", ctypes.c_float),
                ("aiCores", ctypes.c_uint32), ("soc", ctypes.c_char * 32), ("logitScale", ctypes.c_float),
                ("softcap", ctypes.c_float)]


class _Result(ctypes.Structure):
    """CannFlceResult (ascendc_kernels/cann_host/flce_tiling_host.cpp)."""
    _fields_ = [("status", ctypes.c_uint32), ("blockDim", ctypes.c_uint32), ("scheduleMode", ctypes.c_uint32),
                ("workspaceCount", ctypes.c_uint32), ("tilingKey", ctypes.c_uint64), ("tilingBytes", ctypes.c_uint64),
                ("workspaceBytes", ctypes.c_uint64), ("tiling", ctypes.c_uint8 * 4096), ("log", ctypes.c_char * 8192)]


def _load() -> tuple[ctypes.CDLL | None, str | None]:
    here = pathlib.Path(__file__).resolve().parent.parent  # the package folder
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = here / f"_cann_flce_tiling{suffix}"
        if path.exists():
            try:
                lib = ctypes.CDLL(str(path))
            except OSError as error:
                return None, f"ascend_ops._cann_flce_tiling failed to load: {error}"
            lib.cann_flce_tiling.argtypes = [ctypes.POINTER(_Request), ctypes.POINTER(_Result)]
            lib.cann_flce_tiling_data_size.restype = ctypes.c_uint64
            return lib, None
    return None, ("ascend_ops._cann_flce_tiling is not built: the package build compiles the FLCE TilingFunc "
                  "against CANN's Matmul tiling library only when ../shared/tools/cann-matmul-tiling is beside "
                  "the clone (or ASCEND_OPS_CANN_MATMUL_TILING names it); rebuild with it there")


_lib, unavailable = _load()


@dataclass(frozen=True)
class FlceTilingFuncResult:
    """What the TilingFunc returned and set on its TilingContext."""

    status: int           # ge::graphStatus, GRAPH_SUCCESS (0) or GRAPH_FAILED
    block_dim: int
    schedule_mode: int
    tiling_key: int
    tiling: bytes         # the raw tiling data (FusedLinearCrossEntropyLossGradTilingData)
    workspace_sizes: int  # how many workspace sizes it set
    workspace_bytes: int  # workspace[0]: the Matmul system part + the kernel's user part
    log: str              # the tiling library's warnings and errors during the call

    @property
    def ok(self) -> bool:
        return self.status == GRAPH_SUCCESS


def tiling_data_size() -> int:
    """sizeof(FusedLinearCrossEntropyLossGradTilingData) against CANN's real kernel_tiling.h."""
    return int(_library().cann_flce_tiling_data_size())


def _library() -> ctypes.CDLL:
    if _lib is None:
        raise CannTilingUnavailable(unavailable)
    return _lib


def flce_tiling(bt: int, h: int, v: int, *, bf16: bool, mode: int, target64: bool = False,
                label_smoothing: float = 0.0, ai_cores: int = 0, soc: str = "Ascend910B",
                inputs: int | None = None, options: int = 0, logit_scale: float = 1.0,
                softcap: float = 0.0) -> FlceTilingFuncResult:
    """Calls the FLCE TilingFunc for these shapes (mode 0: logits_max and sum_exp_logits
    given, 1: softmax given; `inputs` overrides which optional inputs are present, bits 1,
    2, 4) on `soc` with `ai_cores` cores (0: the SoC table's). `options`: the loss options'
    optional inputs present besides (8 bias, 16 class_weight, 32 alpha, 64 beta, 128
    gamma), with the attributes `logit_scale` and `softcap`."""
    present = ((3 if mode == 0 else 4) if inputs is None else inputs) | options
    request = _Request(bt, h, v, 2 if bf16 else 1, present, int(target64), label_smoothing, ai_cores,
                       soc.encode(), logit_scale, softcap)
    result = _Result()
    if _library().cann_flce_tiling(ctypes.byref(request), ctypes.byref(result)) != 0:
        raise ValueError(result.log.decode())
    return FlceTilingFuncResult(result.status, result.blockDim, result.scheduleMode, result.tilingKey,
                                bytes(result.tiling[:result.tilingBytes]), result.workspaceCount,
                                result.workspaceBytes, result.log.decode())


def cann_flce_workspace_bytes(bt: int, h: int, v: int, mode: int, cores: int = 24) -> int:
    """The workspace CANN's own FusedLinearCrossEntropyLossGrad kernel asks for at this
    shape, read off its host tiling (hicann/ops-nn v9.0.0
    matmul/fused_linear_cross_entropy_loss_grad/op_host/fused_linear_cross_entropy_loss_grad_tiling.cpp),
    for comparison with ours (tests, scripts/sim_report.py, docs/npu.md).

    Memory-saving mode (MemFriendlyTilingFunc, :413-419 and :561-569): two epochs of every
    core's fp32 results of its three Matmuls (128 x 256, 128 x H and 256 x H per core) and
    the fp32 accumulators [BT, H] and [V, H]. High-performance mode (HighPerfTilingFunc,
    :89-92, :120-121, :151, :204-206, :283-286): wsNum buffers of max(V, BT) (each rounded
    up to 16) x baseM halves, wsNum = min((2·cores − 2) // ceil(H / baseN) + 2,
    max(ceil(BT / baseM), ceil(V / baseM))), baseM x baseN = 128 x 256, or 256 x 128 from
    BT = 23296 on. Both plus GetLibApiWorkSpaceSize() (16 MiB on A2/A3). The formula only:
    CANN's high-performance TilingFunc refuses some shapes outright (V > 24528 on A2/A3,
    docs/npu.md)."""
    sys_bytes = 16 << 20
    if mode == 0:
        return sys_bytes + 2 * cores * (128 * 256 + 128 * h + 256 * h) * 4 + (bt + v) * h * 4
    base_m, base_n = (256, 128) if bt >= 23296 else (128, 256)
    mm1_m, mm1_n, mm2_m = -(-bt // base_m), -(-h // base_n), -(-v // base_m)
    ws_num = min((2 * cores - 2) // mm1_n + 2, max(mm1_m, mm2_m))
    return sys_bytes + max(-(-v // 16) * 16, -(-bt // 16) * 16) * base_m * ws_num * 2
