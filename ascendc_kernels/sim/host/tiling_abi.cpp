// The host tiling functions exposed to the Python tests (tests/test_ascendc_tiling.py),
// with the platform facts as arguments so the tests can vary UB size and core count.
#include <cstring>

#include "../../batch_norm_reduce_backward/op_host/batch_norm_reduce_backward_tiling.h"
#include "../../fused_linear_cross_entropy_loss_grad/op_host/fused_linear_cross_entropy_loss_grad_tiling.h"
#include "asim_abi.h"

namespace akn = ascend_ops_kernels;

extern "C" {

void asim_batch_norm_reduce_backward_tiling(uint64_t n, uint64_t c, uint64_t s, uint32_t dtype, uint32_t stat_dtype,
                                            const akn::PlatformFacts* platform, AsimBnTiling* out) {
  const auto t = akn::TileBatchNormReduceBackward(
      akn::BatchNormReduceBackwardShape{n, c, s, dtype, stat_dtype, true, true, true}, *platform);
  out->data = t.data;
  out->tiling_key = t.tilingKey;
  out->block_dim = t.blockDim;
  out->workspace_bytes = t.workspaceBytes;
  out->ub_bytes_per_element = akn::BnUbBytesPerElement(dtype, t.data.channelsPerTile > 1);
  out->fixed_ub_bytes = akn::BnFixedUbBytes();
  std::strncpy(out->error, t.error.c_str(), sizeof(out->error) - 1);
  out->error[sizeof(out->error) - 1] = '\0';
}

void asim_fused_linear_cross_entropy_loss_grad_tiling(uint64_t bt, uint64_t h, uint64_t v, uint32_t dtype,
                                                      uint32_t mode, int mask_packed, int target64,
                                                      const akn::PlatformFacts* platform, AsimFlceTiling* out) {
  const akn::FusedLinearCrossEntropyLossGradShape shape{bt, h, v, dtype, mode, mask_packed != 0, target64 != 0};
  const auto t = akn::TileFusedLinearCrossEntropyLossGrad(shape, *platform);
  *out = AsimFlceTiling{};
  out->data = t.data;
  out->block_dim = t.blockDim;
  out->tiling_key = t.tilingKey;
  out->sys_workspace_bytes = t.sysWorkspaceBytes;
  out->workspace_bytes = t.workspaceBytes;
  std::strncpy(out->error, t.error.c_str(), sizeof(out->error) - 1);
}

}  // extern "C"
