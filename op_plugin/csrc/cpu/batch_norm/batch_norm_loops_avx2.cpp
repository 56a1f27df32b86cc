// The AVX2 build of the batch-norm loops (batch_norm_loops.inc): the portable build's source
// with its named reduce sums 256-bit wide (8 floats, 4 doubles) and F16C conversions.
// bn_loops() selects it on CPUs with AVX2, FMA and F16C but not AVX512 (AMD EPYC before
// Zen 4, Intel before Skylake-SP): there the portable build's 128-bit reduce took 1.1-1.3x
// aten's bn backward.
#pragma GCC target("avx2,fma,f16c")

#include "batch_norm_loops.h"

#include <immintrin.h>

#define BN_LOOPS_AVX512 0
#define BN_LOOPS_AVX2 1

namespace ascend_ops {
namespace cpu {
namespace bn_avx2 {
namespace {
#include "batch_norm_loops.inc"
}  // namespace

const BnLoops kLoops = {stats_lanes,         stats_rows,          elemt_run,
                        elemt_rows,         backward_elemt_run,  backward_elemt_rows,
                        reduce_runs,        reduce_rows,         stats_lanes_double,
                        reduce_runs_double, "avx2"};
}  // namespace bn_avx2
}  // namespace cpu
}  // namespace ascend_ops
