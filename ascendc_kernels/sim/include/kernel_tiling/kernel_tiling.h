// CANN's kernel_tiling/kernel_tiling.h, for the simulator: only the Matmul tiling,
// AscendC::tiling::TCubeTiling. The header CANN generates (asc-devkit's
// gen_kernel_tiling_data_def.py from matmul_tilingdata.h) declares it as 50 int32_t fields,
// all 0 by default, in the order below; the kernels' tiling structs embed it and the host
// fills it (CANN: MultiCoreMatmulTiling::GetTiling), so the layout must be the real one.
// fused_linear_cross_entropy_loss_grad_tiling_data.h asserts every field's offset; the
// CI's ascendc-check compiles that assertion against the real header, the simulator build
// against this one.
#pragma once

#include <cstdint>

// Every field, in CANN's order (an X-macro: one list for the struct and the checks).
#define ASCEND_OPS_TCUBETILING_FIELDS(X) \
  X(usedCoreNum) X(M) X(N) X(Ka) X(Kb) X(singleCoreM) \
  X(singleCoreN) X(singleCoreK) X(baseM) X(baseN) X(baseK) X(depthA1) \
  X(depthB1) X(stepM) X(stepN) X(isBias) X(transLength) X(iterateOrder) \
  X(shareMode) X(shareL1Size) X(shareL0CSize) X(shareUbSize) X(batchM) X(batchN) \
  X(singleBatchM) X(singleBatchN) X(stepKa) X(stepKb) X(depthAL1CacheUB) X(depthBL1CacheUB) \
  X(dbL0A) X(dbL0B) X(dbL0C) X(ALayoutInfoB) X(ALayoutInfoS) X(ALayoutInfoN) \
  X(ALayoutInfoG) X(ALayoutInfoD) X(BLayoutInfoB) X(BLayoutInfoS) X(BLayoutInfoN) X(BLayoutInfoG) \
  X(BLayoutInfoD) X(CLayoutInfoB) X(CLayoutInfoS1) X(CLayoutInfoN) X(CLayoutInfoG) X(CLayoutInfoS2) \
  X(BatchNum) X(mxTypePara)

namespace AscendC {
namespace tiling {

struct TCubeTiling {
#define ASCEND_OPS_TCUBETILING_FIELD(name) int32_t name = 0;
  ASCEND_OPS_TCUBETILING_FIELDS(ASCEND_OPS_TCUBETILING_FIELD)
#undef ASCEND_OPS_TCUBETILING_FIELD
};

}  // namespace tiling
}  // namespace AscendC

using AscendC::tiling::TCubeTiling;
