"""torch_npu's ProcessGroupHCCL on the emulated device: the "hccl" backend of
torch.distributed for tensors on "npu", registered as torch_npu registers it
(torch_npu/_init/registry/distributed.py:34-44: extended API, devices=["npu"]).

A collective on NPU tensors reaches its c10d operator, which device.dispatch() sends here:
on hardware c10d's PrivateUse1 entry hands the tensors to the group's backend for the
device, ProcessGroupHCCL. Each entry point below makes the checks ProcessGroupHCCL makes
before it launches HCCL, ported one by one with their lines, for an Atlas A2 (below
Ascend950), raising torch_npu's message; then it computes with gloo on the host memory of
the tensors. The checks:

- every tensor an NPU tensor, dense, contiguous in its suggested memory format, one per
  call (check_npu_tensors_different_devices, check_npu_tensors_same_device,
  check_npu_single_tensor);
- the dtypes HCCL reduces on an A2 (checkSupportedDataType): int8, int16, int32, int64,
  float16, bfloat16, float32; no float64 or uint64 (Ascend950 and later only); bool and
  uint8 all-reduced as int32, as allreduce casts them;
- the reduce ops HCCL has (getHcclReduceOp): SUM, MIN, MAX, PRODUCT, AVG (summed, then
  divided); BAND, BOR and BXOR refused;
- the operations: allreduce, broadcast, allgather, _allgather_base, reduce_scatter,
  _reduce_scatter_base and barrier are emulated; any other c10d operator on an NPU tensor
  is refused as not emulated (device.dispatch).

HCCL pairs the k-th collective of each rank with the k-th of the others, whatever they are:
ranks issuing different sequences hang or reduce unrelated buffers together. The emulation
compares each collective's fingerprint (operation, reduce op, dtype, shapes) across the
ranks before running it, over a second gloo channel, and refuses a mismatch naming every
rank's (as torch's TORCH_DISTRIBUTED_DEBUG=DETAIL wrapper does for the backends it wraps).

Sources: Ascend/pytorch at v26.2.0-0day-pytorch2.13.0 (the tag whose version.txt is 2.13.0):
SOURCE and UTILS below, lines as cited; master moves checkSupportedDataType to :168-187
and adds the Ascend950 types there.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed import PrefixStore, ProcessGroupGloo

from npu_emulation.device import DEVICE_NAME, PRIVATE_FORMATS, NpuTensor, kernel

SOURCE = "torch_npu/csrc/distributed/ProcessGroupHCCL.cpp"
UTILS = "torch_npu/csrc/distributed/HCCLUtils.cpp"

#: The emulated SoC is an Atlas A2 (Ascend910B): below Ascend950, so no A5 data types.
ASCEND950 = False

#: HCCLUtils.cpp:52-67 (kScalarTypeToHcclDataType) with the name
#: getHcclDataTypeSerialString gives each HCCL type (:70-85): bool and uint8 share UINT8.
HCCL_TYPE_NAMES = {
    torch.uint8: "at::kByte/at::kBool", torch.bool: "at::kByte/at::kBool",
    torch.int8: "at::kChar", torch.int16: "at::kShort", torch.int32: "at::kInt",
    torch.int64: "at::kLong", torch.float16: "at::kHalf", torch.float32: "at::kFloat",
    torch.float64: "at::kDouble", torch.bfloat16: "at::kBFloat16",
    torch.uint16: "at::ScalarType::UInt16", torch.uint32: "at::ScalarType::UInt32",
    torch.uint64: "at::ScalarType::UInt64", torch.float8_e4m3fn: "at::ScalarType::Float8_e4m3fn",
    torch.float8_e5m2: "at::ScalarType::Float8_e5m2",
}
#: checkSupportedDataType's set (ProcessGroupHCCL.cpp:173-186).
SUPPORTED_DTYPES = frozenset({torch.int8, torch.int16, torch.int32, torch.float16,
                              torch.float32, torch.bfloat16, torch.int64})
#: What master adds on Ascend950 (Atlas A5) only (master ProcessGroupHCCL.cpp:179-182).
ASCEND950_EXTRA_DTYPES = frozenset({torch.uint64, torch.float64})

# NPUException.h:68-85, the codes DIST_ERROR(code) appends (NPUException.cpp:90-106).
PARAM, TYPE, VALUE, NOT_SUPPORT, NOT_FOUND = 1, 2, 3, 7, 8
_CODE_TEXT = {PARAM: "invalid parameter", TYPE: "invalid type", VALUE: "invalid value",
              NOT_SUPPORT: "feature not supported", NOT_FOUND: "resource not found"}

_RED_OP = {op.value: op for op in dist.ReduceOp.RedOpType.__members__.values()}
#: getHcclReduceOp's unsupportedOp (ProcessGroupHCCL.cpp:91-95).
UNSUPPORTED_REDUCE_OPS = {dist.ReduceOp.RedOpType.BAND: "BAND",
                          dist.ReduceOp.RedOpType.BOR: "BOR",
                          dist.ReduceOp.RedOpType.BXOR: "BXOR"}

#: Bytes of one rank's collective fingerprint.
_FINGERPRINT_BYTES = 512


class _Group:
    """An hccl group of this process: gloo computing the collectives, and a second gloo
    channel for the fingerprints."""

    def __init__(self, options):
        store, rank, size = options.store, options.group_rank, options.group_size
        self.rank, self.size = rank, size
        self.gloo = ProcessGroupGloo(store, rank, size, options.timeout)
        self.fingerprints = ProcessGroupGloo(PrefixStore("fingerprints/", store), rank, size,
                                             options.timeout)


_GROUPS: dict[str, _Group] = {}


def _new_process_group_hccl(options, pg_options):
    """The backend torch.distributed registers for "npu" in an hccl group: gloo's, with
    the group kept here for the checks (the stand-in of _new_process_group_hccl_helper)."""
    group = _Group(options)
    _GROUPS[options.group_id] = group
    return group.gloo


def install() -> None:
    dist.Backend.register_backend("hccl", _new_process_group_hccl, extended_api=True,
                                  devices=[DEVICE_NAME])


# --- the checks, as ProcessGroupHCCL makes them ---

def _fail(message: str, code: int) -> None:
    """TORCH_CHECK(false, message, DIST_ERROR(code)): a RuntimeError with the code's line."""
    raise RuntimeError(f"{message}\n[ERROR] (emulated torch_npu) ERR02{code:03d} DIST "
                       f"{_CODE_TEXT[code]}")


def _internal_offset(t: torch.Tensor) -> bool:
    return getattr(t, "npu_format", None) in PRIVATE_FORMATS and t.storage_offset() != 0


def _contiguous(t: torch.Tensor) -> bool:
    """t.is_contiguous(t.suggest_memory_format()): contiguous, or channels-last contiguous
    where its strides suggest that layout (4-D and 5-D)."""
    layout = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
    return t.is_contiguous() or (layout is not None and t.is_contiguous(memory_format=layout))


def _npu_and_dense(t) -> bool:
    return isinstance(t, NpuTensor) and not t.is_sparse


def _check_different_devices(tensors: list) -> None:
    """check_npu_tensors_different_devices (ProcessGroupHCCL.cpp:3134-3172)."""
    if not tensors:
        _fail("Tensor list must be nonempty", PARAM)                                # :3136-3138
    if len(tensors) != 1:  # one NPU per process
        _fail("Tensor list mustn't be larger than the number of available NPUs",
              VALUE)                                                                # :3140-3142
    first = tensors[0]
    for t in tensors:
        if not _npu_and_dense(t):
            _fail("Tensors must be NPU and dense", TYPE)                            # :3149-3151
        if t.dtype != first.dtype:
            _fail("Tensors must have identical type", TYPE)                         # :3152-3154
        if not _contiguous(t):
            _fail("Tensors must be contiguous", TYPE)                               # :3161-3163
        if _internal_offset(t):
            _fail("For a tensor of internal format, it's storage_offset must be 0",
                  NOT_SUPPORT)                                                      # :3164-3166


def _non_overlapping_and_dense(t: torch.Tensor) -> bool:
    """at::Tensor::is_non_overlapping_and_dense: some permutation of the dims is contiguous."""
    dims = sorted((d for d in range(t.dim()) if t.size(d) != 1), key=t.stride)
    expected = 1
    for d in dims:
        if t.stride(d) != expected:
            return False
        expected *= t.size(d)
    return True


def _check_same_device(tensors: list) -> None:
    """check_npu_tensors_same_device (ProcessGroupHCCL.cpp:3175-3206)."""
    if not tensors:
        _fail("Tensor list must be nonempty", PARAM)                                # :3177-3179
    first = tensors[0]
    for t in tensors:
        if not _npu_and_dense(t):
            _fail("Tensors must be NPU and dense", TYPE)                            # :3184-3186
        if t.dtype != first.dtype:
            _fail("Tensors must have identical type", TYPE)                         # :3188-3191
        if not _non_overlapping_and_dense(t):
            _fail("Tensors must be non-overlapping and dense", TYPE)                # :3193-3196
        if _internal_offset(t):
            _fail("For a tensor of internal format, it's storage_offset must be 0",
                  NOT_SUPPORT)                                                      # :3202-3204


def _check_single(t) -> None:
    """check_npu_single_tensor (ProcessGroupHCCL.cpp:3209-3220)."""
    if not _npu_and_dense(t):
        _fail("Tensors must be NPU and dense", TYPE)                                # :3211-3213
    if not _contiguous(t):
        _fail("Tensors must be contiguous", TYPE)                                   # :3214-3216
    if _internal_offset(t):
        _fail("For a tensor of internal format, it's storage_offset must be 0", NOT_SUPPORT)


def _hccl_type_name(dtype: torch.dtype) -> str:
    """getHcclDataType (HCCLUtils.cpp:88-95): a dtype HCCL has no type for is refused."""
    if dtype not in HCCL_TYPE_NAMES:
        _fail("Unsupported data type for HCCL process group", NOT_SUPPORT)
    return HCCL_TYPE_NAMES[dtype]


def _check_supported_dtype(dtype: torch.dtype, function: str) -> None:
    """checkSupportedDataType (ProcessGroupHCCL.cpp:173-186), called by every reducing
    collective (allreduce :4708, reduce_scatter :5854, _reduce_scatter_base :6090, ...)."""
    name = _hccl_type_name(dtype)
    if dtype in SUPPORTED_DTYPES or (ASCEND950 and dtype in ASCEND950_EXTRA_DTYPES):
        return
    _fail(f"HCCL {function}: Unsupported data type {name}", NOT_SUPPORT)


def _reduce_op(reduce_op, dtype: torch.dtype) -> tuple[dist.ReduceOp, bool]:
    """getHcclReduceOp (ProcessGroupHCCL.cpp:138-170) for a tensor of `dtype` as HCCL gets
    it: (the op gloo runs, whether the result is then divided by the group size, as AVG's
    is)."""
    op = _RED_OP[reduce_op.op()]
    R = dist.ReduceOp.RedOpType
    if op == R.AVG:  # :140-144: HCCL has no AVG; summed, divided after (:4750-4755)
        return dist.ReduceOp.SUM, True
    if op == R.PREMUL_SUM:  # :146-153
        raise NotImplementedError("emulated ProcessGroupHCCL: ReduceOp.PREMUL_SUM is not emulated")
    if op == R.SUM and dtype == torch.bool:  # :155-160: a bitwise or
        return dist.ReduceOp.MAX, False
    if op in UNSUPPORTED_REDUCE_OPS:  # :162-165
        _fail(f"Cannot use ReduceOp.{UNSUPPORTED_REDUCE_OPS[op]} with HCCL", NOT_SUPPORT)
    return {R.SUM: dist.ReduceOp.SUM, R.MIN: dist.ReduceOp.MIN, R.MAX: dist.ReduceOp.MAX,
            R.PRODUCT: dist.ReduceOp.PRODUCT}[op], False


# --- pairing across ranks ---

def _agree(group: _Group, operation: str, *tensors: torch.Tensor, reduce: str = "") -> None:
    """Refuse the collective unless every rank of `group` is issuing the same one now."""
    mine = f"{operation}{' ' + reduce if reduce else ''} " + ", ".join(
        f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}" for t in tensors)
    data = mine.encode()[:_FINGERPRINT_BYTES]
    buffer = torch.zeros(_FINGERPRINT_BYTES, dtype=torch.uint8)
    buffer[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    everyone = [torch.empty_like(buffer) for _ in range(group.size)]
    group.fingerprints.allgather([everyone], [buffer]).wait()
    seen = [bytes(t.tolist()).rstrip(b"\0").decode() for t in everyone]
    if any(s != seen[0] for s in seen):
        raise RuntimeError(
            "emulated HCCL: the ranks' collectives do not pair (HCCL would pair them anyway, "
            "hanging or reducing unrelated buffers): "
            + "; ".join(f"rank {r} {s}" for r, s in enumerate(seen)))


def _group_of(process_group) -> _Group:
    """The hccl group of a c10d operator's process group (torch's own error where the
    group has no backend for "npu", as on hardware)."""
    pg = dist.ProcessGroup.unbox(process_group)
    pg._get_backend(torch.device(DEVICE_NAME))
    return _GROUPS[pg.group_name]


def _host(t: NpuTensor) -> torch.Tensor:
    return t.host


# --- the collectives ---

@kernel("c10d::allreduce_")
def allreduce_(tensors, process_group, reduce_op, sparse_indices=None, async_op=True, timeout=-1):
    """ProcessGroupHCCL::allreduce (ProcessGroupHCCL.cpp:4691-4764)."""
    group = _group_of(process_group)
    _check_different_devices(tensors)                                               # :4695
    [t] = tensors
    # bool and uint8 travel as int32 (:4734-4737): the type check (:4708) and the reduce op
    # (:4714) see that
    wire = torch.int32 if t.dtype in (torch.bool, torch.uint8) else t.dtype
    _check_supported_dtype(wire, "allreduce")
    op, average = _reduce_op(reduce_op, wire)
    _agree(group, "allreduce", t, reduce=op.name)
    options = dist.AllreduceOptions()
    options.reduceOp = op
    host = _host(t)
    buffer = host.to(wire) if wire != t.dtype else host
    work = group.gloo.allreduce([buffer], options)
    work.wait()
    if average:
        buffer.div_(group.size)                                                     # :4750-4755
    if buffer is not host:
        host.copy_(buffer.to(host.dtype))                                           # :4756-4760
    return tensors, work.boxed()


@kernel("c10d::broadcast_")
def broadcast_(tensors, process_group, root_rank, root_tensor, async_op=True, timeout=-1):
    """ProcessGroupHCCL::broadcast (ProcessGroupHCCL.cpp:4900-4952): any HCCL type."""
    group = _group_of(process_group)
    _check_different_devices(tensors)                                               # :4904
    _hccl_type_name(tensors[0].dtype)
    _agree(group, f"broadcast from {root_rank}", tensors[0])
    options = dist.BroadcastOptions()
    options.rootRank, options.rootTensor = root_rank, root_tensor
    work = group.gloo.broadcast([_host(t) for t in tensors], options)
    work.wait()
    return tensors, work.boxed()


@kernel("c10d::allgather_")
def allgather_(output_tensors, input_tensors, process_group, async_op=True, timeout=-1):
    """ProcessGroupHCCL::allgather (ProcessGroupHCCL.cpp:5453-5634), outputs of one size
    (the uneven form, :5635 on, is not emulated): any HCCL type."""
    group = _group_of(process_group)
    _check_same_device(output_tensors[-1])                                          # :5458
    _check_different_devices(input_tensors)                                         # :5459
    _hccl_type_name(input_tensors[0].dtype)
    outputs = output_tensors[-1]
    if any(o.shape != outputs[0].shape for o in outputs):
        raise NotImplementedError("emulated ProcessGroupHCCL: an allgather into outputs of "
                                  "different sizes is not emulated")
    if len(outputs) != group.size:  # flatten_for_scatter_gather (:3295-3300)
        _fail("Tensor list input to scatter/gather must match number of collective participants",
              PARAM)
    _agree(group, "allgather", input_tensors[0], *outputs)
    work = group.gloo.allgather([[_host(o) for o in outputs]], [_host(input_tensors[0])])
    work.wait()
    return output_tensors, work.boxed()


@kernel("c10d::_allgather_base_")
def allgather_base_(output_tensor, input_tensor, process_group, async_op=True, timeout=-1):
    """ProcessGroupHCCL::_allgather_base (ProcessGroupHCCL.cpp:5776-5832): any HCCL type."""
    group = _group_of(process_group)
    if input_tensor.dtype != output_tensor.dtype:                                   # :5781-5783
        _fail("output tensor must have the same type as input tensor", PARAM)
    if input_tensor.numel() * group.size != output_tensor.numel():                  # :5784-5786
        _fail("output tensor size must be equal to world_size times input tensor size", PARAM)
    _check_different_devices([input_tensor])                                        # :5789
    _check_different_devices([output_tensor])                                       # :5790
    _hccl_type_name(input_tensor.dtype)
    _agree(group, "_allgather_base", input_tensor, output_tensor)
    work = group.gloo._allgather_base(_host(output_tensor), _host(input_tensor))
    work.wait()
    return output_tensor, work.boxed()


@kernel("c10d::reduce_scatter_")
def reduce_scatter_(output_tensors, input_tensors, process_group, reduce_op, async_op=True,
                    timeout=-1):
    """ProcessGroupHCCL::reduce_scatter (ProcessGroupHCCL.cpp:5833-6060), inputs of one size
    (the branch from :5845; the other is not emulated)."""
    group = _group_of(process_group)
    _check_different_devices(output_tensors)                                        # :5838
    _check_same_device(input_tensors[-1])                                           # :5839
    inputs = input_tensors[-1]
    if any(i.shape != inputs[0].shape for i in inputs):
        raise NotImplementedError("emulated ProcessGroupHCCL: a reduce_scatter from inputs of "
                                  "different sizes is not emulated")
    _check_supported_dtype(inputs[0].dtype, "reduce_scatter")                      # :5854
    op, average = _reduce_op(reduce_op, inputs[0].dtype)
    _agree(group, "reduce_scatter", output_tensors[0], *inputs, reduce=op.name)
    options = dist.ReduceScatterOptions()
    options.reduceOp = op
    work = group.gloo.reduce_scatter([_host(output_tensors[0])], [[_host(i) for i in inputs]],
                                     options)
    work.wait()
    if average:
        _host(output_tensors[0]).div_(group.size)
    return output_tensors, work.boxed()


@kernel("c10d::_reduce_scatter_base_")
def reduce_scatter_base_(output_tensor, input_tensor, process_group, reduce_op, async_op=True,
                         timeout=-1):
    """ProcessGroupHCCL::_reduce_scatter_base (ProcessGroupHCCL.cpp:6061-6142)."""
    group = _group_of(process_group)
    _check_single(input_tensor)                                                     # :6066
    if input_tensor.dtype != output_tensor.dtype:                                   # :6067-6069
        _fail("input tensor must be the same type as the output tensor.", TYPE)
    if input_tensor.numel() != output_tensor.numel() * group.size:                  # :6071-6073
        _fail("input tensor must be the same size as output size times world size", PARAM)
    _check_supported_dtype(input_tensor.dtype, "_reduce_scatter_base")              # :6090
    op, average = _reduce_op(reduce_op, input_tensor.dtype)
    _agree(group, "_reduce_scatter_base", output_tensor, input_tensor, reduce=op.name)
    options = dist.ReduceScatterOptions()
    options.reduceOp = op
    work = group.gloo._reduce_scatter_base(_host(output_tensor), _host(input_tensor), options)
    work.wait()
    if average:
        _host(output_tensor).div_(group.size)
    return output_tensor, work.boxed()


@kernel("c10d::barrier")
def barrier(tensor, process_group, device_ids, async_op=True, timeout=-1):
    """ProcessGroupHCCL::barrier (ProcessGroupHCCL.cpp:6207-6238): an allreduce of a float32
    one on the device."""
    group = _group_of(process_group)
    _agree(group, "barrier")
    work = group.gloo.allreduce([torch.ones(1)])
    work.wait()
    return work.boxed()
