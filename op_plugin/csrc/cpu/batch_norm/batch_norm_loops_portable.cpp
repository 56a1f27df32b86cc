// The portable build of the batch-norm loops (batch_norm_loops.inc): the compiler's
// baseline (SSE2 on x86-64), for any CPU.
#include "batch_norm_loops.h"

#if defined(__SSE2__)
#include <emmintrin.h>  // the reduce's float-to-double pair conversion, bf16 widening
#endif

#define BN_LOOPS_AVX512 0
#define BN_LOOPS_AVX2 0

namespace ascend_ops {
namespace cpu {
namespace bn_portable {
namespace {
#include "batch_norm_loops.inc"
}  // namespace

const BnLoops kLoops = {stats_lanes,         stats_rows,          elemt_run,
                        elemt_rows,         backward_elemt_run,  backward_elemt_rows,
                        reduce_runs,        reduce_rows,         stats_lanes_double,
                        reduce_runs_double, "portable"};
}  // namespace bn_portable

}  // namespace cpu
}  // namespace ascend_ops
