// Registration of ascend_ops kernels under aten operators that have no CPU kernel.
#pragma once

#include <string>
#include <vector>

namespace ascend_ops {

// The aten operators of the sync-BN family that ascend_ops can serve on CPU:
// batch_norm_stats, batch_norm_gather_stats_with_counts, batch_norm_elemt,
// batch_norm_backward_reduce, batch_norm_backward_elemt.
const std::vector<std::string>& aten_batch_norm_ops();

// Registers our CPU kernel of aten::<op> (one of aten_batch_norm_ops()). Python calls it
// at import, and only when the dispatcher has no CPU kernel there. Idempotent: returns
// true when this call registered it, false when it already was.
bool register_aten_batch_norm_cpu(const std::string& op);

}  // namespace ascend_ops
