"""The emulated NPU device: torch's PrivateUse1 backend, named "npu" as torch_npu names it,
with every tensor's elements held in host memory.

A tensor on it is an `NpuTensor`: a wrapper subclass whose device is npu:0 and whose
elements live in `.host`, a CPU tensor of the same shape, strides and dtype (views of an
NpuTensor are views of its host tensor, so in-place writes through them are seen). Every
operator called on one reaches `dispatch()`:

- an operator with a registered kernel (`KERNELS`: torch_npu's aten kernels and our
  adapter's, each ending in a stand-in of a CANN aclnn op that enforces the op's phase-1
  rules, cann.py) runs that kernel, which gets the NpuTensors themselves;
- an operator of another library that the dispatcher holds a PrivateUse1 kernel for
  (torch.library.register_kernel(..., "npu"), a CompositeExplicitAutograd body: torch's
  own custom ops, e.g. F.linear_cross_entropy's) runs that kernel on the NpuTensors, as
  on hardware;
- a collective (a c10d operator) goes to the stand-in of torch_npu's ProcessGroupHCCL
  (hccl.py), which applies its rules and computes with gloo;
- any other operator (element-wise arithmetic, views, copies) runs torch's CPU kernel on
  the host tensors and its outputs are wrapped again; these are not checked against CANN's
  rules (docs/npu.md, "What is verified where", says which are).

What a device does that a host tensor would hide is enforced: an operator mixing NPU
tensors with CPU tensors of one or more dimensions is refused with torch's message; an
operator torch_npu 2.13 registers no PrivateUse1 kernel for (`UNREGISTERED`) is refused as
the dispatcher refuses it; memory a kernel allocates (torch.empty and friends, the outputs
torch_npu's kernels allocate) is poisoned (NaN, or a sentinel for integers), so an output
an op leaves unwritten shows; and every host synchronisation (.item(), a blocking copy
between host and device in either direction, an operator whose output size depends on the
data) is counted (`host_syncs()`), so a path that claims to read nothing on the host can be
held to it. torch_npu's blocking copy waits for the stream before its memcpy
(`aclrtSynchronizeStream`, Ascend/pytorch v26.2.0-0day-pytorch2.13.0
torch_npu/csrc/aten/ops/op_api/CopyKernelOpApi.cpp:71-89); a non_blocking one does not.
The format an aclnn op sees is `acl_format(t)`: torch_npu's ConvertType gives a tensor in a
base format the format of its rank.
"""

from __future__ import annotations

import threading
from typing import Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map

aten = torch.ops.aten

DEVICE_NAME = "npu"

#: ACL formats (CANN's aclFormat, acl_base.h) an emulated tensor can carry or an aclTensor
#: can be given; CANN's op_api checks read them (op::IsPrivateFormat: the 5HD / fractal
#: layouts).
FORMAT_NCHW, FORMAT_NHWC, FORMAT_ND, FORMAT_NC1HWC0, FORMAT_FRACTAL_Z = 0, 1, 2, 3, 4
FORMAT_FRACTAL_NZ, FORMAT_NCDHW, FORMAT_NDC1HWC0, FORMAT_NCL = 29, 30, 32, 47
PRIVATE_FORMATS = frozenset({FORMAT_NC1HWC0, FORMAT_FRACTAL_Z, FORMAT_FRACTAL_NZ,
                             FORMAT_NDC1HWC0})
#: torch_npu's FormatHelper::IsOpInputBaseFormat (Ascend/pytorch v26.2.0-0day-pytorch2.13.0
#: torch_npu/csrc/framework/FormatHelper.cpp:150-158): storage formats ConvertType replaces.
OP_INPUT_BASE_FORMATS = frozenset({FORMAT_ND, FORMAT_NCHW, FORMAT_NHWC, FORMAT_NCDHW})
#: ConvertType's format for a tensor in a base format, by rank (op-plugin 26.1.0
#: op_plugin/utils/op_api_common.cpp:959-972: NCL_DIM_NUM, NCHW_DIM_NUM, NCDHW_DIM_NUM).
_FORMAT_OF_RANK = {3: FORMAT_NCL, 4: FORMAT_NCHW, 5: FORMAT_NCDHW}

#: {"namespace::op.overload": kernel}: what torch_npu (or our adapter) registers for
#: PrivateUse1. A kernel takes the operator's arguments with NpuTensors as they are.
KERNELS: dict[str, Callable] = {}

#: Operators that move data between the host and the device (no same-device rule).
_CROSS_DEVICE = {aten._to_copy.default, aten.copy_.default, aten._copy_from.default,
                 aten._copy_from_and_resize.default, aten._has_compatible_shallow_copy_type.default}
#: Operators that allocate without writing: their outputs are poisoned.
_ALLOCATING = {aten.empty_like.default, aten.new_empty.default, aten.new_empty_strided.default,
               aten.empty.memory_format, aten.empty_strided.default}
#: Operators whose output size depends on the data: each waits for the device.
_DATA_DEPENDENT = {aten.nonzero.default, aten.masked_select.default, aten.unique_dim.default,
                   aten._unique2.default, aten.unique_consecutive.default}
#: Namespaces whose operators run on the host tensors (torch_npu's own kernels of them are
#: in KERNELS where the emulation states them) or go to the HCCL stand-in (c10d).
_HOST_NAMESPACES = {"aten", "prims", "c10d"}
_PRIVATEUSE1 = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)
#: Operators torch_npu 2.13.0 registers no PrivateUse1 kernel for (tests/npu_link reads
#: this from libtorch_npu.so): on a device they fail in the dispatcher.
UNREGISTERED = {aten._assert_async.msg}

_syncs = threading.local()


def kernel(name: str) -> Callable[[Callable], Callable]:
    """Register `function` as the PrivateUse1 kernel of operator `name` ("aten::x.overload"
    or "aten::x" for the default overload)."""
    def register(function: Callable) -> Callable:
        KERNELS[name if "." in name.split("::")[1] else name + ".default"] = function
        return function
    return register


class NpuTensor(torch.Tensor):
    """A tensor on the emulated NPU; `.host` holds its elements, `.npu_format` its ACL
    format (ND unless torch_npu.npu_format_cast set another)."""

    host: torch.Tensor
    npu_format: int

    @staticmethod
    def __new__(cls, host: torch.Tensor, npu_format: int = FORMAT_ND):
        assert not isinstance(host, NpuTensor) and host.device.type == "cpu"
        tensor = torch.Tensor._make_wrapper_subclass(
            cls, host.shape, strides=host.stride(), storage_offset=host.storage_offset(),
            dtype=host.dtype, device=torch.device(DEVICE_NAME, 0), requires_grad=False)
        tensor.host = host
        tensor.npu_format = npu_format
        return tensor

    def __repr__(self, *, tensor_contents=None) -> str:
        return f"NpuTensor({self.host!r}, device='{DEVICE_NAME}:0')"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return dispatch(func, args, kwargs or {})


def empty(shape, dtype: torch.dtype, npu_format: int = FORMAT_ND) -> NpuTensor:
    """Fresh device memory, poisoned: what at::empty on the NPU gives a kernel."""
    return NpuTensor(_poison(torch.empty(shape, dtype=dtype)), npu_format)


def host_syncs() -> int:
    """How many times this thread has waited for the emulated device."""
    return getattr(_syncs, "count", 0)


def _count_sync() -> None:
    _syncs.count = host_syncs() + 1


def _poison(host: torch.Tensor) -> torch.Tensor:
    """NaN in floating memory, a sentinel far outside any index range in integer memory."""
    if host.dtype.is_floating_point or host.dtype.is_complex:
        host.fill_(float("nan"))
    elif host.dtype not in (torch.bool, torch.uint8, torch.int8):
        host.fill_(torch.iinfo(host.dtype).max)
    elif host.dtype == torch.uint8:
        host.fill_(0xA5)
    return host


def _is_npu_device(device) -> bool:
    return device is not None and torch.device(device).type == DEVICE_NAME


def acl_format(t: torch.Tensor) -> int:
    """The aclFormat of the aclTensor torch_npu's ConvertType makes of `t` (op-plugin 26.1.0
    op_plugin/utils/op_api_common.cpp:941-972): a tensor whose storage format is a base
    one (OP_INPUT_BASE_FORMATS) gets the format of its rank, NCL for 3-D, NCHW for 4-D,
    NCDHW for 5-D, ND otherwise; any other keeps its storage format."""
    own = getattr(t, "npu_format", FORMAT_ND)
    if own not in OP_INPUT_BASE_FORMATS:
        return own
    return _FORMAT_OF_RANK.get(t.dim(), FORMAT_ND)


def _syncs_host(func, flat_args: list, args: tuple, kwargs: dict) -> bool:
    """Whether `func` makes the host wait for the device."""
    if func in (aten._local_scalar_dense.default, aten.item.default):
        return True
    if func in _DATA_DEPENDENT:
        return True
    if func is aten._to_copy.default:  # a copy to the host; a dtype change stays on the device
        device = kwargs.get("device")
        return (isinstance(flat_args[0], NpuTensor) and device is not None
                and not _is_npu_device(device) and not kwargs.get("non_blocking", False))
    if func is aten.copy_.default:  # dst.copy_(src, non_blocking): host <-> device, blocking
        across = isinstance(flat_args[0], NpuTensor) != isinstance(flat_args[1], NpuTensor)
        return across and not kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
    if func in (aten.index.Tensor, aten.index_put_.default, aten.index_put.default):
        indices = flat_args[1:]
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)
    return False


def _check_one_device(func, flat_args: list) -> None:
    """torch refuses an operator over tensors of two devices (a CPU scalar aside)."""
    if func in _CROSS_DEVICE:
        return
    if any(isinstance(a, torch.Tensor) and not isinstance(a, NpuTensor) and a.dim() > 0
           for a in flat_args):
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, "
            f"{DEVICE_NAME}:0 and cpu! (when checking argument for {func})")


def dispatch(func, args: tuple, kwargs: dict):
    """Every operator on an NpuTensor comes here (and the factories on device npu)."""
    registered = KERNELS.get(f"{func._schema.name}.{func._overloadname}")
    if registered is not None:
        return registered(*args, **kwargs)
    if func.namespace not in _HOST_NAMESPACES and torch._C._dispatch_has_kernel_for_dispatch_key(
            func.name(), "PrivateUse1"):
        return func.redispatch(_PRIVATEUSE1, *args, **kwargs)
    if func in UNREGISTERED:
        raise NotImplementedError(
            f"Could not run '{func._schema.name}.{func._overloadname}' with arguments from the "
            f"'PrivateUse1' backend (the emulated torch_npu 2.13.0 registers no kernel for it)")
    if func.namespace == "c10d":
        raise NotImplementedError(f"emulated ProcessGroupHCCL: {func} is not emulated "
                                  f"(tests/npu_emulation/hccl.py lists what is)")
    return run_on_host(func, args, kwargs)


def run_on_host(func, args: tuple, kwargs: dict):
    """`func` by torch's CPU kernel on the host tensors, its outputs back on the device."""
    flat, _ = tree_flatten((args, kwargs))
    _check_one_device(func, flat)
    if _syncs_host(func, [a for a in flat if isinstance(a, torch.Tensor) or a is None], args,
                   kwargs):
        _count_sync()
    originals = {id(a.host if isinstance(a, NpuTensor) else a): a
                 for a in flat if isinstance(a, torch.Tensor)}

    def to_host(value):
        if isinstance(value, NpuTensor):
            return value.host
        if isinstance(value, torch.device) and value.type == DEVICE_NAME:
            return torch.device("cpu")
        return value

    host_kwargs = dict(kwargs)
    target = host_kwargs.get("device")
    out = func(*tree_map(to_host, args), **tree_map(to_host, host_kwargs))
    if func in _ALLOCATING:
        tree_map(lambda t: _poison(t) if isinstance(t, torch.Tensor) else t, out)
    if target is not None and not _is_npu_device(target):
        return out  # a copy to the host (or another factory on the host)
    on_device = target is not None or any(isinstance(a, NpuTensor) for a in flat)

    def to_device(value):
        if not isinstance(value, torch.Tensor):
            return value
        if id(value) in originals:  # an in-place or out= result: the caller's own tensor
            return originals[id(value)]
        return NpuTensor(value) if on_device else value

    return tree_map(to_device, out)


class NpuModule:
    """`torch.npu` / `torch_npu.npu`: one emulated device per process, as a rank sees it
    with ASCEND_RT_VISIBLE_DEVICES set to its own NPU."""

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def set_device(device) -> None:
        index = torch.device(DEVICE_NAME, device).index if isinstance(device, int) else torch.device(device).index
        if index not in (None, 0):
            raise RuntimeError(f"emulated NPU: only npu:0 is visible, got {device}")

    @staticmethod
    def synchronize(device=None) -> None:
        _count_sync()

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    @staticmethod
    def manual_seed(seed: int) -> None:
        pass

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        pass

    @staticmethod
    def get_amp_supported_dtype() -> list[torch.dtype]:
        return [torch.float16, torch.bfloat16]

    @staticmethod
    def is_bf16_supported() -> bool:
        return True

    @staticmethod
    def empty_cache() -> None:
        pass


_library: torch.library.Library | None = None


def install() -> NpuModule:
    """Make "npu" a device of this process (once): torch's Python PrivateUse1 backend,
    renamed as torch_npu renames it, its factories allocating poisoned host memory."""
    global _library
    if _library is not None:
        return torch.npu
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    module = NpuModule()
    _setup_privateuseone_for_python_backend(DEVICE_NAME, backend_module=module)
    _library = torch.library.Library("aten", "IMPL")

    def empty_memory_format(size, *, dtype=None, layout=None, device=None, pin_memory=None,
                            memory_format=None):
        host = torch.empty(size, dtype=dtype, memory_format=memory_format or torch.contiguous_format)
        return NpuTensor(_poison(host))

    def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
        return NpuTensor(_poison(torch.empty_strided(size, stride, dtype=dtype)))

    def copy_from(self, dst, non_blocking=False):
        # Reached without the Python key (torch.tensor(..., device="npu") builds its
        # tensor with it excluded): the copy between host and device memory, which waits
        # for the stream unless non_blocking (CopyKernelOpApi.cpp:77-85).
        if not non_blocking and self.device.type != dst.device.type:
            _count_sync()
        _host_of(dst).copy_(_host_of(self))
        return dst

    def copy_from_and_resize(self, dst):
        if self.device.type != dst.device.type:
            _count_sync()
        _host_of(dst).resize_(self.shape).copy_(_host_of(self))
        return dst

    # The backward runs on the calling thread (this thread's setting): with multithreading
    # on, torch's autograd engine starts a worker thread for npu:0 whose device guard is
    # Python code, and the process then aborts at exit ("terminate called without an
    # active exception", 4 of 10 runs of a SyncBatchNorm step). Our code does not depend
    # on which thread runs its backward.
    torch._C._set_multithreading_enabled(False)

    _library.impl("empty.memory_format", empty_memory_format, "PrivateUse1")
    _library.impl("empty_strided", empty_strided, "PrivateUse1")
    _library.impl("_copy_from", copy_from, "PrivateUse1")
    _library.impl("_copy_from_and_resize", copy_from_and_resize, "PrivateUse1")
    return module


def _host_of(t: torch.Tensor) -> torch.Tensor:
    return t.host if isinstance(t, NpuTensor) else t
