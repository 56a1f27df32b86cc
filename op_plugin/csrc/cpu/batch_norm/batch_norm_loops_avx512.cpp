// The AVX512 build of the batch-norm loops (batch_norm_loops.inc): the same source,
// vectorised 16 floats (8 doubles) wide. bn_loops() selects it only on CPUs with
// AVX512-F/BW/VL/DQ (every such CPU also has FMA and F16C).
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")

#include "batch_norm_loops.h"

#include <immintrin.h>  // F16C conversion of float16 loads

#define BN_LOOPS_AVX512 1
#define BN_LOOPS_AVX2 0

namespace ascend_ops {
namespace cpu {
namespace bn_avx512 {
namespace {
#include "batch_norm_loops.inc"
}  // namespace

const BnLoops kLoops = {stats_lanes,         stats_rows,          elemt_run,
                        elemt_rows,         backward_elemt_run,  backward_elemt_rows,
                        reduce_runs,        reduce_rows,         stats_lanes_double,
                        reduce_runs_double, "avx512"};
}  // namespace bn_avx512
}  // namespace cpu
}  // namespace ascend_ops
