"""Training modules built on the ascend_ops operators."""

from .loss import LinearCrossEntropyLoss
from .sync_batch_norm import SyncBatchNorm

__all__ = ["LinearCrossEntropyLoss", "SyncBatchNorm"]
