"""Stand-in torch_npu 2.13.0 for the NPU emulation (tests/npu_emulation): importing it makes
"npu" a device of this process, registers torch_npu's kernels and our adapter's on it and
the "hccl" backend of torch.distributed, and provides `ascend_ops._npu`. Never installed: a
test puts its directory on PYTHONPATH."""

import pathlib
import sys

_TESTS = pathlib.Path(__file__).resolve().parents[3]
if str(_TESTS) not in sys.path:
    sys.path.insert(0, str(_TESTS))

from npu_emulation import adapter as _adapter  # noqa: E402
from npu_emulation import device as _device  # noqa: E402
from npu_emulation import hccl as _hccl  # noqa: E402
from npu_emulation import torch_npu_kernels as _kernels  # noqa: E402,F401  (registers them)

__version__ = "2.13.0"
npu = _device.install()
_adapter.install()
_hccl.install()


def npu_format_cast(tensor, acl_format: int):
    """torch_npu.npu_format_cast: the same elements, carried in another ACL format."""
    return _device.NpuTensor(tensor.host, acl_format)


def get_npu_format(tensor) -> int:
    return tensor.npu_format


def host_syncs() -> int:
    """The emulation's count of host synchronisations on this thread (not torch_npu API)."""
    return _device.host_syncs()


def npu_fusion_attention(*args, **kwargs):
    """Imported by Transformers when torch_npu is present (its NPU flash attention); not
    emulated: models here run their eager or SDPA attention."""
    raise NotImplementedError("emulated torch_npu: npu_fusion_attention is not emulated; "
                              "use attn_implementation='eager' or 'sdpa'")
