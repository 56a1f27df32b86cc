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
  int check_determinism;        // run the launch twice (schedule seeds 0 and 1), compare the outputs
  uint64_t schedule_seed;       // thread-start and atomic-add order (~0: a new seed per launch)
  // The loss options (SPEC §7; all null: the plain op): the per-row coefficients replace
  // grad; bias and class_weight are optional beside them; logit_scale 1 and softcap 0 are none.
  const float* bias;            // [V] or null
  const float* class_weight;    // [V] or null
  const float* alpha;           // [BT] or null
  const float* beta;            // [BT] or null
  const float* gamma;           // [BT] or null
  float logit_scale;
  float softcap;
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

// The cost model of one FLCE launch (flce_model.cpp): seconds and bytes on the 910B at one
// end of the rates' range (common/platform.h ChipRates).
struct AsimFlceModel {
  double cube_flops;        // all cube cores
  double roofline_s;        // cube_flops at the chip's cube peak (24 cores at the rates' clock)
  double modelled_s;        // the sum of the steps' times
  double cube_bound_s, vector_bound_s, hbm_bound_s, l2_bound_s;  // the steps each bound, their time
  // The Matmul calls (IterateAll), all cube cores: how many, and their time by part: the
  // first L1 fill before the first mmad, the fixpipe drain of C, the mmads, and the time
  // the operands' L1 fills held the mmads back once the pipeline ran.
  double fill_s, drain_s, mmad_s, operand_wait_s;
  uint64_t calls, max_core_calls;
  uint64_t hbm_read_bytes, hbm_write_bytes;  // L2 misses and write-backs (lines)
  uint64_t l2_read_bytes, l2_write_bytes;    // every access, as the simulator counts them
  uint64_t vector_repeats;                   // all vector cores' 256-byte repeats
  uint64_t atomic_add_bytes;                 // fixpipe atomic adds (in L2 each is a read and a write)
  uint64_t atomic_rmw_lines;                 // L2 lines read-modified-written by them
  uint64_t max_line_adders;                  // most cores adding into one line within one step
  uint64_t steps, footprint_bytes, line_bytes, l2_lines;
};

// What-if layouts for the model (not what the kernel does; asim_flce_model's `layouts`):
// bit 0, G read transposed (weight_grad's A) comes from an NZ copy; bit 1, every operand does.
enum AsimFlceLayouts : uint32_t { kAsimTransposedGNz = 1, kAsimAllNz = 2 };

struct AsimFlceTiling {
  FusedLinearCrossEntropyLossGradTilingData data;
  uint32_t block_dim;
  uint64_t tiling_key, sys_workspace_bytes, workspace_bytes;
  char error[128];
};

}  // extern "C"
