// Registration of ascend_ops kernels under aten operators that have no CPU kernel.
#pragma once

namespace ascend_ops {

// Registers the batch_norm_reduce_backward CPU kernel as the CPU kernel of
// aten::batch_norm_backward_reduce. Python calls it at import, and only when the
// dispatcher has no CPU kernel there (a later PyTorch may bring its own). Idempotent:
// returns true when this call registered it, false when it already was.
bool register_aten_batch_norm_backward_reduce_cpu();

}  // namespace ascend_ops
