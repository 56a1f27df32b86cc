"""The training API on the operators: vocab-parallel `linear_cross_entropy` (with its checks,
logits-gradient cache and float32 path), `distributed`, `nn` (LinearCrossEntropyLoss,
SyncBatchNorm) and `integrations` (Hugging Face). Public under ascend_ops' own names."""
