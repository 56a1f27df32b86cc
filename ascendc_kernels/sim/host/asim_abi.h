// The structs the Python side (ctypes) exchanges with the simulator library. Python
// declares each one again; abi_layout.cpp exports every size and field offset, and
// ascend_ops._sim checks its declarations against them when the library loads, so a
// layout changed on one side only is a clear error instead of garbage.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../batch_norm_reduce_backward/op_kernel/batch_norm_reduce_backward_tiling_data.h"
#include "../../common/platform.h"
#include "../../fused_linear_cross_entropy_loss_grad/op_kernel/fused_linear_cross_entropy_loss_grad_tiling_data.h"

extern "C" {

// What the last operator call cost (asim_last_counters).
struct AsimCounters {
  uint64_t gm_read_bytes, gm_write_bytes, ub_high_water, vector_instructions, vector_repeats,
      max_block_vector_repeats, cube_flops, block_dim, launches, max_core_cube_flops, cube_cores,
      touched_data_bytes, touched_workspace_bytes;
};

// The arguments of the FLCE two-phase functions.
struct AsimFlceArgs {
  const float* grad;            // [BT]
  const void* input;            // [BT, H]
  const void* weight;           // [V, H]
  const void* target_mask;      // packed uint8 [mask_bytes] or bool [BT]
  uint64_t mask_bytes;
  const void* masked_target;    // int32/int64 [BT]
  const float* logits_max;      // [BT] or null (high-performance mode)
  const float* sum_exp_logits;  // [BT] or null
  const float* softmax;         // [BT, V] or null (memory-saving mode)
  void* input_grad;             // [BT, H]
  void* weight_grad;            // [V, H]
  uint64_t bt, h, v;
  uint32_t dtype;
  int mask_packed;
  int target64;
  uint32_t ai_cores;            // cube cores (2 vector cores each); 0: the platform's
};

// The tiling functions' results (tiling_abi.cpp, for tests/test_ascendc_tiling.py).
struct AsimBnTiling {
  BatchNormReduceBackwardTilingData data;
  uint64_t tiling_key;
  uint32_t block_dim;
  uint64_t workspace_bytes;
  uint32_t ub_bytes_per_element;
  uint32_t fixed_ub_bytes;
  char error[128];
};

struct AsimFlceTiling {
  FusedLinearCrossEntropyLossGradTilingData data;
  uint32_t block_dim;
  uint64_t tiling_key, sys_workspace_bytes, workspace_bytes;
  char error[128];
};

}  // extern "C"
