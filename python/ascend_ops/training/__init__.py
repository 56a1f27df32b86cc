"""The training API on the operators: `lce` (vocab-parallel `linear_cross_entropy`, its
routes and torch's F.linear_cross_entropy on them), `distributed`, `nn`
(LinearCrossEntropyLoss, SyncBatchNorm) and `integrations` (Hugging Face). Public under
ascend_ops' own names."""
