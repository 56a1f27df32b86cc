// The portable build of the batch-norm loops (batch_norm_loops.inc), and the choice
// between it and the AVX512 build.
#include "../gemm/avx512_kernels.h"
#include "../gemm/engine_switch.h"
#include "batch_norm_loops.h"

#if defined(__SSE2__)
#include <emmintrin.h>  // the reduce's float-to-double pair conversion, bf16 widening
#endif

#define BN_LOOPS_AVX512 0

namespace ascend_ops {
namespace cpu {
namespace bn_portable {
namespace {
#include "batch_norm_loops.inc"
}  // namespace

const BnLoops kLoops = {stats_lanes,         stats_rows,          elemt_run,
                        elemt_rows,         backward_elemt_run,  backward_elemt_rows,
                        reduce_runs,        reduce_rows,         "portable"};
}  // namespace bn_portable

const BnLoops& bn_loops() {
  // The switch is read per call (a getenv per kernel call is noise) so tests can switch paths,
  // and parsed on every CPU, so a bad value is an error on every CPU.
  const bool portable = portable_forced();
  return avx512_core_supported() && !portable ? bn_avx512::kLoops : bn_portable::kLoops;
}

}  // namespace cpu
}  // namespace ascend_ops
