"""impl="sim": the Ascend C kernels (ascendc_kernels/) run on the project's CPU simulator.

`ascend_ops._ascendc_sim` is a plain C++ library built by setup.py from the kernels, their
host tiling and the simulator (ascendc_kernels/sim); it is loaded with ctypes. Each op
runs like its aclnn two-phase API: ask for the workspace size, allocate it, run. FLCE
gets its tiling data, key, blockDim and workspace size from its CANN TilingFunc, run on
the host against CANN's own Matmul tiling library (`_cann_tiling`); without that library
it cannot run (`CannTilingUnavailable`). Any
simulator rule a kernel breaks raises `SimulatorError` naming the kernel, block and call.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import math
import pathlib
from dataclasses import dataclass

import torch

from . import cann_tiling as _cann_tiling

__all__ = ["SimulatorError", "Counters", "load_error", "last_counters", "platform_910b",
           "batch_norm_reduce_backward", "fused_linear_cross_entropy_loss_grad"]


class SimulatorError(RuntimeError):
    """A kernel broke a simulator rule, or the host tiling rejected the shape."""


_u64, _u32, _int, _vp, _f64 = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int, ctypes.c_void_p, ctypes.c_double


# The structs exchanged with the library, each declared again here for ctypes. Their C
# definitions are in ascendc_kernels/ (common/platform.h, the *_tiling_data.h headers,
# sim/host/asim_abi.h); `layout_mismatches` compares every size and field offset with
# what the library exports (sim/host/abi_layout.cpp) when it loads.

class PlatformFacts(ctypes.Structure):
    """ascend_ops_kernels::PlatformFacts (common/platform.h): the one hardware description."""
    _fields_ = [("ubBytes", _u32), ("blockBytes", _u32), ("repeatBytes", _u32), ("vectorCores", _u32),
                ("aiCores", _u32), ("l1Bytes", _u32), ("l0aBytes", _u32), ("l0bBytes", _u32), ("l0cBytes", _u32),
                ("reserved", _u32), ("l2Bytes", _u64)]


class ChipRates(ctypes.Structure):
    """ascend_ops_kernels::ChipRates (common/platform.h): one end of the chip's rates, for the cost model."""
    _fields_ = [(name, _f64) for name in ("clockHz", "hbmBytesPerS", "l2ReadBytesPerS", "l2WriteBytesPerS",
                                          "ndFillBytesPerCycle", "nzFillBytesPerCycle", "drainBytesPerCycle",
                                          "l1ToL0BytesPerCycle")] + [("l2PortsShared", _u32),
                                                                     ("drainOverlapsFill", _u32)]


class _Counters(ctypes.Structure):
    _fields_ = [(name, _u64) for name in (
        "gm_read_bytes", "gm_write_bytes", "ub_high_water", "vector_instructions", "vector_repeats",
        "max_block_vector_repeats", "cube_flops", "block_dim", "launches", "max_core_cube_flops", "cube_cores",
        "touched_data_bytes", "touched_workspace_bytes")]


class _FlceArgs(ctypes.Structure):
    _fields_ = [("grad", _vp), ("input", _vp), ("weight", _vp), ("target_mask", _vp), ("mask_bytes", _u64),
                ("masked_target", _vp), ("logits_max", _vp), ("sum_exp_logits", _vp), ("softmax", _vp),
                ("input_grad", _vp), ("weight_grad", _vp), ("bt", _u64), ("h", _u64), ("v", _u64),
                ("dtype", _u32), ("mask_packed", _int), ("target64", _int), ("ai_cores", _u32),
                ("check_determinism", _int), ("schedule_seed", _u64), ("bias", _vp), ("class_weight", _vp),
                ("alpha", _vp), ("beta", _vp), ("gamma", _vp), ("logit_scale", ctypes.c_float),
                ("softcap", ctypes.c_float)]


class BnTilingData(ctypes.Structure):
    """BatchNormReduceBackwardTilingData (batch_norm_reduce_backward_tiling_data.h)."""
    _fields_ = [("n", _u64), ("c", _u64), ("s", _u64), ("tileRows", _u32), ("tileCols", _u32),
                ("tilePitch", _u32), ("accElems", _u32), ("channelsPerTile", _u32), ("channelBlocks", _u32),
                ("rowTiles", _u64), ("colTiles", _u64), ("segments", _u32), ("usedCores", _u32), ("tasks", _u64),
                ("stageChannels", _u32), ("inputG", _u32), ("weightG", _u32), ("biasG", _u32)]


class BnTiling(ctypes.Structure):
    """AsimBnTiling (sim/host/asim_abi.h): what the BN tiling function returns."""
    _fields_ = [("data", BnTilingData), ("tiling_key", _u64), ("block_dim", _u32), ("workspace_bytes", _u64),
                ("ub_bytes_per_element", _u32), ("fixed_ub_bytes", _u32), ("error", ctypes.c_char * 128)]


# AscendC::tiling::TCubeTiling, CANN's 50 int32 fields in order (sim/include/kernel_tiling/kernel_tiling.h).
FLCE_MATMUL_FIELDS = (
    "usedCoreNum", "M", "N", "Ka", "Kb", "singleCoreM", "singleCoreN", "singleCoreK", "baseM", "baseN", "baseK",
    "depthA1", "depthB1", "stepM", "stepN", "isBias", "transLength", "iterateOrder", "shareMode", "shareL1Size",
    "shareL0CSize", "shareUbSize", "batchM", "batchN", "singleBatchM", "singleBatchN", "stepKa", "stepKb",
    "depthAL1CacheUB", "depthBL1CacheUB", "dbL0A", "dbL0B", "dbL0C", "ALayoutInfoB", "ALayoutInfoS", "ALayoutInfoN",
    "ALayoutInfoG", "ALayoutInfoD", "BLayoutInfoB", "BLayoutInfoS", "BLayoutInfoN", "BLayoutInfoG", "BLayoutInfoD",
    "CLayoutInfoB", "CLayoutInfoS1", "CLayoutInfoN", "CLayoutInfoG", "CLayoutInfoS2", "BatchNum", "mxTypePara")


class FlceMatmulTiling(ctypes.Structure):
    """TCubeTiling (kernel_tiling/kernel_tiling.h): one Matmul's tiling, as the FLCE tiling data embeds it."""
    _fields_ = [(name, ctypes.c_int32) for name in FLCE_MATMUL_FIELDS]


class FlceTilingData(ctypes.Structure):
    """FusedLinearCrossEntropyLossGradTilingData (fused_linear_cross_entropy_loss_grad_tiling_data.h)."""
    _fields_ = [("bt", _u64), ("h", _u64), ("v", _u64), ("rowBlocks", _u64), ("colBlocks", _u64),
                ("rowBlock", _u32), ("colBlock", _u32), ("cubeCores", _u32), ("mode", _u32),
                ("windowRowBlocks", _u32), ("windowColBlocks", _u32), ("windowRows", _u64), ("windowCols", _u64),
                ("windows", _u64), ("tileM", _u32), ("tileN", _u32), ("hTiles", _u64), ("groupRowBlocks", _u32),
                ("gTileRows", _u32), ("chunkCols", _u32), ("castRows", _u32), ("castCols", _u32), ("options", _u32),
                ("logitScale", ctypes.c_float), ("softcap", ctypes.c_float),
                ("ringBytes", _u64), ("logitsSlotBytes", _u64), ("gOffset", _u64), ("gWindowBytes", _u64),
                ("accOffset", _u64), ("reportOffset", _u64), ("userWorkspaceBytes", _u64),
                ("logitsMm", FlceMatmulTiling), ("inputGradMm", FlceMatmulTiling),
                ("weightGradMm", FlceMatmulTiling)]


class FlceModel(ctypes.Structure):
    """AsimFlceModel (sim/host/asim_abi.h): the modelled cost of one FLCE launch (sim/host/flce_model.cpp)."""
    _fields_ = ([(name, _f64) for name in ("cube_flops", "roofline_s", "modelled_s", "cube_bound_s", "vector_bound_s",
                                           "hbm_bound_s", "l2_bound_s", "fill_s", "drain_s", "mmad_s",
                                           "operand_wait_s")]
                + [(name, _u64) for name in ("calls", "max_core_calls", "hbm_read_bytes", "hbm_write_bytes", "l2_read_bytes", "l2_write_bytes",
                                             "vector_repeats", "atomic_add_bytes", "atomic_rmw_lines", "max_line_adders", "steps",
                                             "footprint_bytes", "line_bytes", "l2_lines")])


class FlceTiling(ctypes.Structure):
    """AsimFlceTiling (sim/host/asim_abi.h): what the FLCE tiling function returns."""
    _fields_ = [("data", FlceTilingData), ("block_dim", _u32), ("tiling_key", _u64), ("sys_workspace_bytes", _u64),
                ("workspace_bytes", _u64), ("error", ctypes.c_char * 128)]


#: Python declaration -> the C struct's name in the library's layout table.
ABI_STRUCTS = {PlatformFacts: "PlatformFacts", ChipRates: "ChipRates", _Counters: "AsimCounters", _FlceArgs: "AsimFlceArgs",
               BnTilingData: "BnTilingData", BnTiling: "AsimBnTiling", FlceMatmulTiling: "TCubeTiling",
               FlceTilingData: "FlceTilingData", FlceModel: "AsimFlceModel",
               FlceTiling: "AsimFlceTiling"}


def layout_mismatches(lib: ctypes.CDLL, structs: dict | None = None) -> list[str]:
    """Every difference between the ctypes declarations and the library's structs."""
    lib.asim_layout.restype = ctypes.c_int64
    lib.asim_layout.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    problems = []
    for py, c_name in (ABI_STRUCTS if structs is None else structs).items():
        size = lib.asim_layout(c_name.encode(), b"")
        if size < 0:
            problems.append(f"{c_name}: not in the library's layout table")
            continue
        if size != ctypes.sizeof(py):
            problems.append(f"{c_name}: {size} bytes in C, {ctypes.sizeof(py)} in Python")
        for field, _ in py._fields_:
            offset = lib.asim_layout(c_name.encode(), field.encode())
            if offset != getattr(py, field).offset:
                where = "missing in C" if offset < 0 else f"offset {offset} in C"
                problems.append(f"{c_name}.{field}: {where}, offset {getattr(py, field).offset} in Python")
    return problems


def _load(here: pathlib.Path) -> tuple[ctypes.CDLL | None, str | None]:
    """The simulator library in directory `here`, or the reason it cannot be used."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = here / f"_ascendc_sim{suffix}"
        if path.exists():
            try:
                lib = ctypes.CDLL(str(path))
            except OSError as error:
                return None, f"ascend_ops._ascendc_sim failed to load: {error}"
            if not hasattr(lib, "asim_layout"):
                return None, "ascend_ops._ascendc_sim is out of date (it exports no layout table): rebuild it"
            problems = layout_mismatches(lib)
            if problems:
                return None, ("ascend_ops._ascendc_sim does not match the ctypes structs of ascend_ops/sim/simulator.py "
                              "(rebuild the library, or carry the C change over to sim/simulator.py): " + "; ".join(problems))
            return lib, None
    return None, ("ascend_ops._ascendc_sim is not built: the package build compiles it from "
                  "ascendc_kernels/ with the C++ compiler (rebuild with g++ available)")


_lib, load_error = _load(pathlib.Path(__file__).resolve().parent.parent)

if _lib is not None:
    _lib.asim_last_error.restype = ctypes.c_char_p
    _lib.asim_last_counters.argtypes = [ctypes.POINTER(_Counters)]
    _lib.asim_batch_norm_reduce_backward_workspace_size.argtypes = [
        _u64, _u64, _u64, _u32, _u32, _int, _int, _int, _u32, ctypes.POINTER(_u64)]
    _lib.asim_batch_norm_reduce_backward.argtypes = [
        _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _u64, _u64, _u64, _u64, _u32, _u32, _int, _int, _int, _u32]
    _lib.asim_fused_linear_cross_entropy_loss_grad.argtypes = [
        ctypes.POINTER(_FlceArgs), _vp, _u64, _u32, _u64, _vp, _u64]
    _lib.asim_run_selftest_kernel.argtypes = [ctypes.c_int32, _u32, _vp, _vp, ctypes.c_char_p, _u64]
    _lib.asim_run_selftest_syncall.argtypes = [_u32, _vp, _vp, ctypes.c_int32, ctypes.c_char_p, _u64]
    _lib.asim_run_selftest_mix.argtypes = [ctypes.c_int32, _u32, _vp, _vp, _vp, ctypes.c_int32, ctypes.c_char_p, _u64]
    _lib.asim_run_selftest_gm.argtypes = [ctypes.c_int32, _u32, _vp, ctypes.c_char_p, _u64]
    _lib.asim_run_selftest_fields.argtypes = [ctypes.c_int32, _vp, _u64, _vp, _u64, _vp, _u64, ctypes.c_char_p,
                                              _u64]
    _lib.asim_run_selftest_cast.argtypes = [_u32, _vp, _vp, ctypes.c_char_p, _u64]
    _lib.asim_run_selftest_vector_order.argtypes = [ctypes.c_int32, ctypes.c_int32, _vp, _vp, ctypes.c_char_p, _u64]
    _lib.asim_batch_norm_reduce_backward_tiling.restype = None
    _lib.asim_platform_910b.argtypes = [ctypes.POINTER(PlatformFacts)]
    _lib.asim_platform_910b.restype = None
    _lib.asim_fused_linear_cross_entropy_loss_grad_tiling.restype = None
    _lib.asim_flce_model.argtypes = [ctypes.POINTER(FlceTilingData), _u32, _u64, ctypes.POINTER(ChipRates), _u32,
                                     ctypes.POINTER(FlceModel), ctypes.c_char_p, _u64]
    _lib.asim_chip_rates.argtypes = [_u32, ctypes.POINTER(ChipRates)]

_DTYPE_CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}


@dataclass(frozen=True)
class Counters:
    """What the last operator call cost on the simulator (each op is one launch)."""

    gm_read_bytes: int
    gm_write_bytes: int
    ub_high_water: int  # bytes, the largest over vector cores
    vector_instructions: int
    vector_repeats: int  # 256-byte vector repeats, all blocks
    max_block_vector_repeats: int  # the busiest vector core's repeats
    cube_flops: int
    block_dim: int  # the launch's blockDim (cube cores of a MIX launch)
    launches: int
    max_core_cube_flops: int  # the busiest cube core's FLOPs
    cube_cores: int  # AIC cores of the MIX launch (0: vector only)
    # The L2 model: bytes of 32-byte sectors touched at least once, inputs and outputs
    # (each read from or written to HBM once when the footprint fits in L2) and workspace.
    touched_data_bytes: int
    touched_workspace_bytes: int


def library() -> ctypes.CDLL:
    if _lib is None:
        raise RuntimeError(load_error)
    return _lib


def platform_910b() -> PlatformFacts:
    """The Atlas A2 (910B) description the tilings and the simulator use (common/platform.h)."""
    facts = PlatformFacts()
    library().asim_platform_910b(ctypes.byref(facts))
    return facts


def _check(status: int) -> None:
    if status == 2:  # the kernel reported bad input (SPEC §1's ValueError)
        raise ValueError(library().asim_last_error().decode())
    if status != 0:
        raise SimulatorError(library().asim_last_error().decode())


def last_counters() -> Counters:
    raw = _Counters()
    library().asim_last_counters(ctypes.byref(raw))
    return Counters(*(getattr(raw, name) for name, _ in _Counters._fields_))


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def batch_norm_reduce_backward(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g,
                               *, vector_cores: int = 0):
    """SPEC §2 on the simulator; the caller has validated the arguments."""
    del weight  # does not enter the math
    from ..reference import batch_norm_reduce_output_dtype
    lib = library()
    n, c = input.shape[0], input.shape[1]
    s = math.prod(input.shape[2:])
    out_dtype = batch_norm_reduce_output_dtype(input.dtype, mean.dtype)
    grad_out, input = grad_out.contiguous(), input.contiguous()
    # The kernel reads mean and invstd in their own dtype (float32, float16 or bfloat16)
    # when they share one; otherwise both go as float32 (a C-element cast).
    if mean.dtype != invstd.dtype:
        mean, invstd = mean.float(), invstd.float()
    mean, invstd = mean.contiguous(), invstd.contiguous()
    # The kernel writes its sums in the dtype its own codes give (BnOutputHalf), which after
    # that cast can be float32 where SPEC's is float16 (float16 input and mean, float32
    # invstd): size the buffers by the codes passed, then cast to SPEC's dtype.
    kernel_dtype = batch_norm_reduce_output_dtype(input.dtype, mean.dtype)
    wanted = (input_g, input_g, weight_g, bias_g)
    outs = [torch.empty(c, dtype=kernel_dtype) if want else None for want in wanted]
    shape = (n, c, s, _DTYPE_CODE[input.dtype], _DTYPE_CODE[mean.dtype],
             bool(input_g), bool(weight_g), bool(bias_g))
    workspace_bytes = _u64()
    _check(lib.asim_batch_norm_reduce_backward_workspace_size(*shape, vector_cores, ctypes.byref(workspace_bytes)))
    workspace = torch.empty(max(workspace_bytes.value, 1), dtype=torch.uint8)
    _check(lib.asim_batch_norm_reduce_backward(
        _ptr(grad_out), _ptr(input), _ptr(mean), _ptr(invstd), *(_ptr(o) for o in outs),
        _ptr(workspace), workspace_bytes.value, *shape, vector_cores))
    return tuple(None if o is None else o.to(out_dtype) for o in outs)


#: schedule_seed for "a new seed per launch" (the simulator's default).
NEW_SEED_PER_LAUNCH = 2**64 - 1


def fused_linear_cross_entropy_loss_grad(grad, input, weight, target_mask, masked_target, label_smoothing=0.0,
                                         logits_max=None, sum_exp_logits=None, softmax=None,
                                         *, ai_cores: int = 0, check_determinism: bool = False,
                                         schedule_seed: int = NEW_SEED_PER_LAUNCH, options: FlceOptions | None = None):
    """SPEC §1 on the simulator (one MIX launch, `ai_cores` cube cores with 2 vector cores
    each; 0: the platform's 24); the caller has validated the arguments.
    `check_determinism`: run the launch twice from the same inputs with opposite thread-start
    and atomic-add orders and raise SimulatorError unless the outputs are bitwise equal;
    `schedule_seed` picks those orders for a single run. High-performance mode writes G
    over `softmax` (each row into the first half of its own bytes), as CANN's op does.
    `options`: the loss options of SPEC §7 (FlceOptions; its alpha, beta, gamma replace
    grad), as the npu_custom backward passes them."""
    del label_smoothing  # validated to be 0.0
    lib = library()
    bt, h = input.shape
    v = weight.shape[0]
    contiguous = [None if t is None else t.contiguous() for t in
                  (grad, input, weight, target_mask, masked_target, logits_max, sum_exp_logits, softmax)]
    grad, input, weight, target_mask, masked_target, logits_max, sum_exp_logits, softmax = contiguous
    o = options.contiguous() if options is not None else None
    input_grad = torch.empty(bt, h, dtype=input.dtype)
    weight_grad = torch.empty(v, h, dtype=input.dtype)
    args = _FlceArgs(
        _ptr(grad), _ptr(input), _ptr(weight), _ptr(target_mask), target_mask.numel(), _ptr(masked_target),
        _ptr(logits_max), _ptr(sum_exp_logits), _ptr(softmax), _ptr(input_grad), _ptr(weight_grad),
        bt, h, v, _DTYPE_CODE[input.dtype], target_mask.dtype == torch.uint8,
        masked_target.dtype == torch.int64, ai_cores, int(check_determinism), schedule_seed,
        *((_ptr(o.bias), _ptr(o.class_weight), _ptr(o.alpha), _ptr(o.beta), _ptr(o.gamma), o.logit_scale,
           o.softcap) if o is not None else (None, None, None, None, None, 1.0, 0.0)))
    if bt == 0 or h == 0 or v == 0:  # nothing to launch: both outputs zero (the NPU adapter does not call the op)
        _check(lib.asim_fused_linear_cross_entropy_loss_grad(ctypes.byref(args), None, 0, 0, 0, None, 0))
        return input_grad, weight_grad
    tiling = flce_tiling_func(bt, h, v, input.dtype, softmax is None, masked_target.dtype == torch.int64, ai_cores,
                              options=o)
    workspace = torch.empty(tiling.workspace_bytes, dtype=torch.uint8)
    _check(lib.asim_fused_linear_cross_entropy_loss_grad(
        ctypes.byref(args), ctypes.byref(flce_tiling_data(tiling)), tiling.tiling_key, tiling.block_dim, tiling.workspace_bytes,
        _ptr(workspace), tiling.workspace_bytes))
    return input_grad, weight_grad


@dataclass(frozen=True)
class FlceOptions:
    """The loss options' operands of one FLCE launch (SPEC §7): alpha, beta, gamma fp32
    [BT] (they replace grad), bias and class_weight fp32 [V] or None, the logit scale and
    the soft-cap (0: none)."""

    alpha: torch.Tensor
    beta: torch.Tensor
    gamma: torch.Tensor
    bias: torch.Tensor | None = None
    class_weight: torch.Tensor | None = None
    logit_scale: float = 1.0
    softcap: float = 0.0

    def contiguous(self) -> "FlceOptions":
        def c(t):
            return None if t is None else t.float().contiguous()
        return FlceOptions(c(self.alpha), c(self.beta), c(self.gamma), c(self.bias), c(self.class_weight),
                           float(self.logit_scale), float(self.softcap))

    @property
    def input_bits(self) -> int:
        """The optional inputs present, as the TilingFunc's request counts them."""
        return 32 | 64 | 128 | (8 if self.bias is not None else 0) | (16 if self.class_weight is not None else 0)


#: How impl="sim" starts the error for a shape the op package's kernel cannot take (its
#: TilingFunc refuses it; docs/npu.md, "Our package's limits").
OP_PACKAGE_REFUSAL = "fused_linear_cross_entropy_loss_grad: the op package refuses"


def flce_tiling_func(bt: int, h: int, v: int, dtype: torch.dtype, memory_saving: bool, target64: bool,
                     ai_cores: int = 0, options: FlceOptions | None = None) -> _cann_tiling.TilingFuncResult:
    """The FLCE TilingFunc's answer for this call (CANN's Matmul tiling inside), as the
    simulator launches it; raises ValueError with its reason when the TilingFunc refuses
    the call, SimulatorError when it fails otherwise, and CannTilingUnavailable when it
    was not built."""
    result = _cann_tiling.flce_tiling(bt, h, v, bf16=dtype == torch.bfloat16, mode=0 if memory_saving else 1,
                                      target64=target64, ai_cores=ai_cores,
                                      options=options.input_bits if options is not None else 0,
                                      logit_scale=options.logit_scale if options is not None else 1.0,
                                      softcap=options.softcap if options is not None else 0.0)
    if not result.ok:
        # The TilingFunc logs why: what the call passed (a shape the package's kernel cannot
        # take, an option it refuses) is the caller's ValueError; anything else is ours.
        if result.refusal is not None:
            raise ValueError(f"{OP_PACKAGE_REFUSAL} BT={bt} H={h} V={v}: {result.refusal}")
        raise SimulatorError(f"fused_linear_cross_entropy_loss_grad: the TilingFunc failed for BT={bt} H={h} "
                             f"V={v} (GRAPH_FAILED){': ' + result.log.strip() if result.log.strip() else ''}")
    if len(result.tiling) != ctypes.sizeof(FlceTilingData):
        raise SimulatorError(f"the TilingFunc wrote {len(result.tiling)} bytes of tiling data, the simulator's "
                             f"FlceTilingData has {ctypes.sizeof(FlceTilingData)}")
    return result


def flce_tiling_data(result: _cann_tiling.TilingFuncResult) -> FlceTilingData:
    """The TilingFunc's raw tiling data as the kernel reads it."""
    return FlceTilingData.from_buffer_copy(result.tiling)


#: The two ends of the chip's rates (common/platform.h kA2RatesFast / kA2RatesSlow).
RATE_ENDS = ("fast", "slow")
#: What-if operand layouts of the model (sim/host/asim_abi.h AsimFlceLayouts).
FLCE_LAYOUTS = {"kernel": 0, "transposed G in NZ": 1, "every operand in NZ": 2}


def chip_rates(end: str) -> ChipRates:
    """The chip's rates at the `end` ("fast" or "slow") of the range the sources give."""
    rates = ChipRates()
    library().asim_chip_rates(RATE_ENDS.index(end), ctypes.byref(rates))
    return rates


def flce_model(bt: int, h: int, v: int, dtype: torch.dtype, memory_saving: bool, *, line_bytes: int = 512,
               ai_cores: int = 0, rates: str = "fast", options: FlceOptions | None = None,
               layouts: str = "kernel") -> FlceModel:
    """The modelled 910B cost of one FLCE launch at this shape (sim/host/flce_model.cpp):
    the TilingFunc's tiling (with `options`' bits, when given), walked in the kernel's own
    order of work, with L2 as an LRU cache of `line_bytes` lines, at the `rates` end of the
    chip's rates ("fast" or "slow"); `layouts` reads some operands from NZ copies instead
    (FLCE_LAYOUTS: a what-if, not the kernel). No element is computed: any shape is quick."""
    tiling = flce_tiling_func(bt, h, v, dtype, memory_saving, False, ai_cores, options=options)
    data = flce_tiling_data(tiling)
    out = FlceModel()
    message = ctypes.create_string_buffer(1024)
    if library().asim_flce_model(ctypes.byref(data), _DTYPE_CODE[dtype], line_bytes, ctypes.byref(chip_rates(rates)),
                                 FLCE_LAYOUTS[layouts], ctypes.byref(out), message, len(message)) != 0:
        raise SimulatorError(f"the FLCE cost model failed: {message.value.decode()}")
    return out


def run_selftest_kernel(bug: int, blocks: int = 2) -> tuple[str | None, torch.Tensor]:
    """Runs the simulator's self-test kernel (y = 2·x) with one injected bug; returns the
    simulator's error message (None when it ran clean) and y."""
    x = torch.arange(blocks * 64, dtype=torch.float32)
    y = torch.zeros_like(x)
    message = ctypes.create_string_buffer(4096)
    status = library().asim_run_selftest_kernel(bug, blocks, _ptr(x), _ptr(y), message, len(message))
    return (message.value.decode() if status else None), y


def run_selftest_syncall(blocks: int, skip_last: bool = False,
                         kernel_type: bool = True) -> tuple[str | None, torch.Tensor]:
    """Each block writes its slot, SyncAll, reads its neighbour's; with skip_last the last
    block returns before SyncAll; without kernel_type the kernel declares no
    KERNEL_TYPE_MIX_AIV_1_0. Returns the simulator's error (None if clean) and what each
    block saw."""
    slots = torch.zeros(blocks, dtype=torch.int32)
    seen = torch.zeros(blocks, dtype=torch.int32)
    message = ctypes.create_string_buffer(4096)
    bug = 1 if skip_last else 0 if kernel_type else 2
    status = library().asim_run_selftest_syncall(blocks, _ptr(slots), _ptr(seen), bug, message, len(message))
    return (message.value.decode() if status else None), seen


def run_selftest_mix(bug: int, blocks: int = 2, check_determinism: bool = False
                     ) -> tuple[str | None, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Runs the simulator's MIX self-test kernel (per AI core: y = 2 · A · Bᵀ, 32 x 32 x 32,
    the product on the cube core with the Matmul API, the scaling on the two vector cores)
    with one injected bug; `check_determinism` runs it twice with opposite schedules and
    compares y. Returns the simulator's error (None when it ran clean), y [blocks, 32, 32]
    and the half inputs (A, B)."""
    generator = torch.Generator().manual_seed(7)
    a = torch.randn(32, 32, generator=generator).half()
    b = torch.randn(32, 32, generator=generator).half()
    y = torch.zeros(blocks + 1, 32, 32)  # the last block: where the atomic-order probe adds
    message = ctypes.create_string_buffer(4096)
    status = library().asim_run_selftest_mix(bug, blocks, _ptr(a), _ptr(b), _ptr(y), int(check_determinism),
                                             message, len(message))
    return (message.value.decode() if status else None), y[:blocks], (a, b)


FIELD_PROBE_PITCH = 65552  # the long operand's row pitch in the field probes: past 65535, 16 when truncated


def run_selftest_fields(probe: int) -> tuple[str | None, torch.Tensor, torch.Tensor]:
    """Runs one probe of the simulator's A2 field-width self-test kernel
    (sim/selftest/selftest_field_kernel.cpp). Matmul probes 1-4 (+10 with intrinsicsCheck):
    C [16, 16] = A [16, 32] · B [32, 16] with A (1), Aᵀ-stored A (2), B (3) or Bᵀ-stored B (4)
    at row pitch FIELD_PROBE_PITCH. Returns the simulator's error (None when clean), C and
    the float64 product of the same operands."""
    m, n, k, pitch = 16, 16, 32, FIELD_PROBE_PITCH
    operand = probe % 10 if probe < 20 else 0
    generator = torch.Generator().manual_seed(11)
    a_logical = torch.randn(m, k, generator=generator).half()
    b_logical = torch.randn(k, n, generator=generator).half()

    def stored(matrix: torch.Tensor, long: bool) -> torch.Tensor:
        """`matrix` [rows, cols] row-major at row pitch `pitch` (long) or compact, flat."""
        rows, cols = matrix.shape
        row_pitch = pitch if long else cols
        flat = torch.full(((rows - 1) * row_pitch + cols,), float("nan"), dtype=torch.half)
        for r in range(rows):
            flat[r * row_pitch:r * row_pitch + cols] = matrix[r]
        return flat

    a = stored(a_logical.t().contiguous() if operand == 2 else a_logical, operand in (1, 2))
    b = stored(b_logical if operand == 3 else b_logical.t().contiguous(), operand in (3, 4))
    if probe >= 20:  # the DataCopy probes read (at most) the first 512 elements of a
        a = torch.zeros(1 << 21, dtype=torch.half)
    c_pitch = pitch if operand == 3 else n  # C's row pitch is orgN, B's when B is the long one
    y = torch.zeros((m - 1) * c_pitch + n)
    message = ctypes.create_string_buffer(4096)
    status = library().asim_run_selftest_fields(probe, _ptr(a), a.numel(), _ptr(b), b.numel(), _ptr(y), y.numel(),
                                                message, len(message))
    expected = (a_logical.double() @ b_logical.double()).float()
    c = torch.stack([y[r * c_pitch:r * c_pitch + n] for r in range(m)])
    return (message.value.decode() if status else None), c, expected


def run_selftest_gm(bug: int, blocks: int = 3) -> tuple[str | None, torch.Tensor]:
    """Runs the GM-rules self-test kernel (each block marks its line with a scalar store,
    SyncAll, copies its neighbour's line in and writes twice it out) with one injected
    bug; returns the simulator's error (None when clean) and what each block wrote."""
    seen = torch.zeros(blocks)
    message = ctypes.create_string_buffer(4096)
    status = library().asim_run_selftest_gm(bug, blocks, _ptr(seen), message, len(message))
    return (message.value.decode() if status else None), seen


def run_selftest_cast(x: torch.Tensor) -> torch.Tensor:
    """The simulator's Cast float32 -> float16 (CAST_RINT) of x (a multiple of 16 floats)."""
    x = x.float().contiguous()
    y = torch.empty(x.numel(), dtype=torch.float16)
    message = ctypes.create_string_buffer(4096)
    _check_selftest(library().asim_run_selftest_cast(x.numel(), _ptr(x), _ptr(y), message, len(message)), message)
    return y


#: The orders of asim_run_selftest_vector_order (sim/selftest/selftest_kernel.cpp): how its
#: Adds and Muls on one UB buffer are ordered, or which same-pipe hazard it leaves unordered.
VECTOR_ORDERS = {"barrier": 0, "raw": 1, "war": 2, "waw": 3, "through_scalar": 4, "vector_flag": 5}


def run_selftest_vector_order(order: str, auto_sync: bool = False) -> tuple[str | None, torch.Tensor]:
    """y = (x + 1)·2 on the vector pipe with its steps ordered as `order` says (rule G);
    `auto_sync`: as if bisheng's --cce-auto-sync had inserted the barriers. Returns the
    simulator's error (None when clean) and y, against x = 0, 1, ..., 63."""
    x = torch.arange(64, dtype=torch.float32)
    y = torch.zeros(64)
    message = ctypes.create_string_buffer(4096)
    status = library().asim_run_selftest_vector_order(VECTOR_ORDERS[order], int(auto_sync), _ptr(x), _ptr(y),
                                                     message, len(message))
    return (message.value.decode() if status else None), y


def _check_selftest(status: int, message) -> None:
    if status != 0:
        raise SimulatorError(message.value.decode())
