"""ascend_ops: fused linear cross entropy (forward companions and backward) and batch-norm
reduce backward, registered as torch operators (`torch.ops.ascend_ops.*`) with a C++ CPU
kernel and a plain-torch reference sharing one validation; and the training API built on
them: `linear_cross_entropy` (vocab-parallel) and `nn.SyncBatchNorm` over torch.distributed.
"""

from __future__ import annotations

import sys

from . import _extension, reference
from ._impls import IMPLS, ImplStatus, available_impls
from .masks import pack_target_mask, unpack_target_mask
from .ops import (
    batch_norm_reduce_backward,
    fused_cross_entropy_loss_with_max_sum,
    fused_linear_cross_entropy_loss_grad,
    fused_linear_online_max_sum,
)
from .npu.compat import (
    npu_fused_cross_entropy_loss_with_max_sum,
    npu_fused_linear_cross_entropy_loss_with_max_sum_backward,
    npu_fused_linear_online_max_sum,
)
from .training.lce import LinearCrossEntropyOutput, linear_cross_entropy
from .training import distributed, nn  # noqa: E402  (need the ops above)
from .training.lce import torch_linear_cross_entropy  # noqa: E402

# The training room's public modules keep their public paths (`from ascend_ops.nn import
# SyncBatchNorm`): the same module objects under both names, never a second copy.
sys.modules[f"{__name__}.nn"] = nn
sys.modules[f"{__name__}.distributed"] = distributed
sys.modules[f"{__name__}.torch_linear_cross_entropy"] = torch_linear_cross_entropy

__all__ = [
    "IMPLS",
    "ImplStatus",
    "LinearCrossEntropyOutput",
    "available_impls",
    "batch_norm_reduce_backward",
    "distributed",
    "fused_cross_entropy_loss_with_max_sum",
    "fused_linear_cross_entropy_loss_grad",
    "fused_linear_online_max_sum",
    "linear_cross_entropy",
    "nn",
    "npu_fused_cross_entropy_loss_with_max_sum",
    "npu_fused_linear_cross_entropy_loss_with_max_sum_backward",
    "npu_fused_linear_online_max_sum",
    "pack_target_mask",
    "reference",
    "torch_linear_cross_entropy",
    "unpack_target_mask",
]
__version__ = "0.1.0"

if _extension.load_error is None:
    from . import _aten, _fake

    _fake.register()
    _aten.register()
    if "torch_npu" in sys.modules:
        # Registers the NPU kernels now, so direct torch.ops.ascend_ops calls on NPU
        # tensors find them too (otherwise the first impl choice loads them).
        from .npu import adapter

        adapter.unavailable_reason()
