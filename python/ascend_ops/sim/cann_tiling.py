"""Both ops' TilingFuncs, run on the host against CANN's own host tiling library.

`ascend_ops._cann_tiling_funcs` (setup.py, ascendc_kernels/cann_host) is
ascendc_kernels/*/op_host/*_def.cpp as shipped, compiled against asc-devkit's host tiling
(CANN 9.0.0, built by ../shared/tools/cann-matmul-tiling) and our TilingContext stand-in.
`flce_tiling` and `bn_tiling` call a registered TilingFunc once; impl="sim" runs the FLCE
kernel with the tiling data it returns. A TilingFunc logs why it refuses a call
(`TilingFuncResult.refusal`). Without the tool the library is not built and `unavailable`
says why.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import pathlib
import re
from dataclasses import dataclass

__all__ = ["CannTilingUnavailable", "unavailable", "TilingFuncResult", "flce_tiling",
           "bn_tiling", "FLCE_INPUTS", "BN_INPUTS", "SOCS", "cann_flce_workspace_bytes"]

#: The SoCs the op package targets (the OpDef's ascend910b and ascend910_93), as the tool's table names them.
SOCS = ("Ascend910B", "Ascend910_93")
GRAPH_SUCCESS = 0
#: The OpDefs' inputs in order (ascendc_kernels/*/op_host/*_def.cpp).
FLCE_INPUTS = ("grad", "input", "weight", "target_mask", "masked_target", "logits_max", "sum_exp_logits", "softmax",
               "bias", "class_weight", "alpha", "beta", "gamma")
BN_INPUTS = ("grad_out", "input", "mean", "invstd", "weight")
_MAX_RANK, _BN_MAX_RANK = 4, 8


class CannTilingUnavailable(RuntimeError):
    """The host TilingFunc library was not built (no CANN Matmul tiling tool at build time)."""


class _Request(ctypes.Structure):
    """CannFlceRequest (ascendc_kernels/cann_host/tiling_func_host.cpp)."""
    _fields_ = [("bt", ctypes.c_uint64), ("h", ctypes.c_uint64), ("v", ctypes.c_uint64), ("dtype", ctypes.c_uint32),
                ("inputs", ctypes.c_uint32), ("target64", ctypes.c_int32), ("labelSmoothing", ctypes.c_float),
                ("aiCores", ctypes.c_uint32), ("soc", ctypes.c_char * 32), ("logitScale", ctypes.c_float),
                ("softcap", ctypes.c_float), ("reshaped", ctypes.c_uint32),
                ("ranks", ctypes.c_uint32 * len(FLCE_INPUTS)),
                ("dims", (ctypes.c_int64 * _MAX_RANK) * len(FLCE_INPUTS))]


class _BnRequest(ctypes.Structure):
    """CannBnRequest (ascendc_kernels/cann_host/tiling_func_host.cpp)."""
    _fields_ = [("ranks", ctypes.c_int32 * len(BN_INPUTS)), ("dims", (ctypes.c_int64 * _BN_MAX_RANK) * len(BN_INPUTS)),
                ("dtype", ctypes.c_uint32), ("statDtype", ctypes.c_uint32), ("inputG", ctypes.c_int32),
                ("weightG", ctypes.c_int32), ("biasG", ctypes.c_int32), ("aiCores", ctypes.c_uint32),
                ("soc", ctypes.c_char * 32)]


class _Result(ctypes.Structure):
    """CannTilingResult (ascendc_kernels/cann_host/tiling_func_host.cpp)."""
    _fields_ = [("status", ctypes.c_uint32), ("blockDim", ctypes.c_uint32), ("scheduleMode", ctypes.c_uint32),
                ("workspaceCount", ctypes.c_uint32), ("tilingKey", ctypes.c_uint64), ("tilingBytes", ctypes.c_uint64),
                ("workspaceBytes", ctypes.c_uint64), ("tiling", ctypes.c_uint8 * 4096), ("log", ctypes.c_char * 8192)]


def _load() -> tuple[ctypes.CDLL | None, str | None]:
    here = pathlib.Path(__file__).resolve().parent.parent  # the package folder
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = here / f"_cann_tiling_funcs{suffix}"
        if path.exists():
            try:
                lib = ctypes.CDLL(str(path))
            except OSError as error:
                return None, f"ascend_ops._cann_tiling_funcs failed to load: {error}"
            lib.cann_flce_tiling.argtypes = [ctypes.POINTER(_Request), ctypes.POINTER(_Result)]
            lib.cann_bn_tiling.argtypes = [ctypes.POINTER(_BnRequest), ctypes.POINTER(_Result)]
            for size in ("cann_flce_tiling_data_size", "cann_flce_request_size", "cann_bn_request_size",
                         "cann_tiling_result_size"):
                getattr(lib, size).restype = ctypes.c_uint64
            sizes = {_Request: lib.cann_flce_request_size(), _BnRequest: lib.cann_bn_request_size(),
                     _Result: lib.cann_tiling_result_size()}
            wrong = [f"{struct.__name__}: {size} bytes in C, {ctypes.sizeof(struct)} in Python"
                     for struct, size in sizes.items() if size != ctypes.sizeof(struct)]
            if wrong:
                return None, "ascend_ops._cann_tiling_funcs does not match its ctypes structs: " + "; ".join(wrong)
            return lib, None
    return None, ("ascend_ops._cann_tiling_funcs is not built: the package build compiles the TilingFuncs "
                  "against CANN's host tiling library only when ../shared/tools/cann-matmul-tiling is beside "
                  "the clone (or ASCEND_OPS_CANN_MATMUL_TILING names it); rebuild with it there")


_lib, unavailable = _load()


_REFUSAL = re.compile(r"AscendOps\w+ refuses this call: (.*)")


@dataclass(frozen=True)
class TilingFuncResult:
    """What a TilingFunc returned and set on its TilingContext."""

    status: int           # ge::graphStatus, GRAPH_SUCCESS (0) or GRAPH_FAILED
    block_dim: int
    schedule_mode: int
    tiling_key: int
    tiling: bytes         # the raw tiling data (the op's TilingData struct)
    workspace_sizes: int  # how many workspace sizes it set
    workspace_bytes: int  # workspace[0]: the library's system part + the kernel's user part
    log: str              # the warnings and errors logged during the call (the library's and the TilingFunc's)

    @property
    def ok(self) -> bool:
        return self.status == GRAPH_SUCCESS

    @property
    def refusal(self) -> str | None:
        """Why the TilingFunc refused what the call passed (its logged reason, naming the
        argument), or None: it succeeded, or failed for a reason no call should reach."""
        match = None if self.ok else _REFUSAL.search(self.log)
        return match.group(1).strip() if match else None



def _result(raw: _Result) -> TilingFuncResult:
    return TilingFuncResult(raw.status, raw.blockDim, raw.scheduleMode, raw.tilingKey,
                            bytes(raw.tiling[:raw.tilingBytes]), raw.workspaceCount, raw.workspaceBytes,
                            raw.log.decode())


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
                softcap: float = 0.0, shapes: dict[str, tuple[int, ...]] | None = None) -> TilingFuncResult:
    """Calls the FLCE TilingFunc for these shapes (mode 0: logits_max and sum_exp_logits
    given, 1: softmax given; `inputs` overrides which optional inputs are present, bits 1,
    2, 4) on `soc` with `ai_cores` cores (0: the SoC table's). `options`: the loss options'
    optional inputs present besides (8 bias, 16 class_weight, 32 alpha, 64 beta, 128
    gamma), with the attributes `logit_scale` and `softcap`. `shapes`: inputs (by their
    FLCE_INPUTS name) given another shape than the adapter's for (bt, h, v), as a malformed
    call through the generated aclnn API would."""
    present = ((3 if mode == 0 else 4) if inputs is None else inputs) | options
    request = _Request(bt, h, v, 2 if bf16 else 1, present, int(target64), label_smoothing, ai_cores,
                       soc.encode(), logit_scale, softcap)
    for name, dims in (shapes or {}).items():
        index = FLCE_INPUTS.index(name)
        if len(dims) > _MAX_RANK:
            raise ValueError(f"{name}: at most {_MAX_RANK} dims, got {dims}")
        request.reshaped |= 1 << index
        request.ranks[index] = len(dims)
        for i, d in enumerate(dims):
            request.dims[index][i] = d
    result = _Result()
    if _library().cann_flce_tiling(ctypes.byref(request), ctypes.byref(result)) != 0:
        raise ValueError(result.log.decode())
    return _result(result)


def bn_tiling(input: tuple[int, ...], *, dtype: int = 0, stat_dtype: int = 0, input_g: bool = True,
              weight_g: bool = True, bias_g: bool = True, shapes: dict[str, tuple[int, ...] | None] | None = None,
              ai_cores: int = 0, soc: str = "Ascend910B") -> TilingFuncResult:
    """Calls the BN TilingFunc for input of shape `input` [N, C, *] (grad_out the same,
    mean, invstd and weight [C]); dtypes as DtypeCode (0 float32, 1 float16, 2 bfloat16).
    `shapes`: inputs (by their BN_INPUTS name) given another shape, None for weight absent."""
    c = input[1] if len(input) > 1 else 1
    given: dict[str, tuple[int, ...] | None] = {"grad_out": input, "input": input, "mean": (c,), "invstd": (c,),
                                                "weight": (c,), **(shapes or {})}
    request = _BnRequest(dtype=dtype, statDtype=stat_dtype, inputG=int(input_g), weightG=int(weight_g),
                         biasG=int(bias_g), aiCores=ai_cores, soc=soc.encode())
    for index, name in enumerate(BN_INPUTS):
        dims = given[name]
        if dims is not None and len(dims) > _BN_MAX_RANK:
            raise ValueError(f"{name}: at most {_BN_MAX_RANK} dims, got {dims}")
        request.ranks[index] = -1 if dims is None else len(dims)
        for i, d in enumerate(dims or ()):
            request.dims[index][i] = d
    result = _Result()
    if _library().cann_bn_tiling(ctypes.byref(request), ctypes.byref(result)) != 0:
        raise ValueError(result.log.decode())
    return _result(result)


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
