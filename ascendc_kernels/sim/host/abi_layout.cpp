// Sizes and field offsets of every struct that crosses the ctypes boundary, and the one
// platform description, exported for ascend_ops._sim (which checks its ctypes copies at
// load) and scripts/sim_report.py (which reads the modelling facts from here).
#include <cstddef>
#include <cstring>

#include "asim_abi.h"

namespace {

struct LayoutEntry {
  const char* type;
  const char* field;  // "" for the struct's size
  uint64_t value;
};

#define ASIM_SIZE(T) {#T, "", sizeof(T)}
#define ASIM_FIELD(T, f) {#T, #f, offsetof(T, f)}

using PlatformFacts = ascend_ops_kernels::PlatformFacts;
using ChipRates = ascend_ops_kernels::ChipRates;
using BnTilingData = BatchNormReduceBackwardTilingData;
using FlceTilingData = FusedLinearCrossEntropyLossGradTilingData;

const LayoutEntry kLayout[] = {
    ASIM_SIZE(PlatformFacts), ASIM_FIELD(PlatformFacts, ubBytes), ASIM_FIELD(PlatformFacts, blockBytes),
    ASIM_FIELD(PlatformFacts, repeatBytes), ASIM_FIELD(PlatformFacts, vectorCores),
    ASIM_FIELD(PlatformFacts, aiCores), ASIM_FIELD(PlatformFacts, l1Bytes),
    ASIM_FIELD(PlatformFacts, l0aBytes), ASIM_FIELD(PlatformFacts, l0bBytes), ASIM_FIELD(PlatformFacts, l0cBytes),
    ASIM_FIELD(PlatformFacts, reserved), ASIM_FIELD(PlatformFacts, l2Bytes),

    ASIM_SIZE(ChipRates), ASIM_FIELD(ChipRates, clockHz), ASIM_FIELD(ChipRates, hbmBytesPerS),
    ASIM_FIELD(ChipRates, l2ReadBytesPerS), ASIM_FIELD(ChipRates, l2WriteBytesPerS),
    ASIM_FIELD(ChipRates, ndFillBytesPerCycle), ASIM_FIELD(ChipRates, nzFillBytesPerCycle),
    ASIM_FIELD(ChipRates, drainBytesPerCycle), ASIM_FIELD(ChipRates, l1ToL0BytesPerCycle),
    ASIM_FIELD(ChipRates, l2PortsShared), ASIM_FIELD(ChipRates, drainOverlapsFill),

    ASIM_SIZE(AsimCounters), ASIM_FIELD(AsimCounters, gm_read_bytes), ASIM_FIELD(AsimCounters, gm_write_bytes),
    ASIM_FIELD(AsimCounters, ub_high_water), ASIM_FIELD(AsimCounters, vector_instructions),
    ASIM_FIELD(AsimCounters, vector_repeats), ASIM_FIELD(AsimCounters, max_block_vector_repeats),
    ASIM_FIELD(AsimCounters, cube_flops), ASIM_FIELD(AsimCounters, block_dim), ASIM_FIELD(AsimCounters, launches),
    ASIM_FIELD(AsimCounters, max_core_cube_flops), ASIM_FIELD(AsimCounters, cube_cores),
    ASIM_FIELD(AsimCounters, touched_data_bytes), ASIM_FIELD(AsimCounters, touched_workspace_bytes),

    ASIM_SIZE(AsimFlceArgs), ASIM_FIELD(AsimFlceArgs, grad), ASIM_FIELD(AsimFlceArgs, input),
    ASIM_FIELD(AsimFlceArgs, weight), ASIM_FIELD(AsimFlceArgs, target_mask), ASIM_FIELD(AsimFlceArgs, mask_bytes),
    ASIM_FIELD(AsimFlceArgs, masked_target), ASIM_FIELD(AsimFlceArgs, logits_max),
    ASIM_FIELD(AsimFlceArgs, sum_exp_logits), ASIM_FIELD(AsimFlceArgs, softmax), ASIM_FIELD(AsimFlceArgs, input_grad),
    ASIM_FIELD(AsimFlceArgs, weight_grad), ASIM_FIELD(AsimFlceArgs, bt), ASIM_FIELD(AsimFlceArgs, h),
    ASIM_FIELD(AsimFlceArgs, v), ASIM_FIELD(AsimFlceArgs, dtype), ASIM_FIELD(AsimFlceArgs, mask_packed),
    ASIM_FIELD(AsimFlceArgs, target64), ASIM_FIELD(AsimFlceArgs, ai_cores),
    ASIM_FIELD(AsimFlceArgs, check_determinism), ASIM_FIELD(AsimFlceArgs, schedule_seed),
    ASIM_FIELD(AsimFlceArgs, bias), ASIM_FIELD(AsimFlceArgs, class_weight), ASIM_FIELD(AsimFlceArgs, alpha),
    ASIM_FIELD(AsimFlceArgs, beta), ASIM_FIELD(AsimFlceArgs, gamma), ASIM_FIELD(AsimFlceArgs, logit_scale),
    ASIM_FIELD(AsimFlceArgs, softcap),

    ASIM_SIZE(BnTilingData), ASIM_FIELD(BnTilingData, n), ASIM_FIELD(BnTilingData, c), ASIM_FIELD(BnTilingData, s),
    ASIM_FIELD(BnTilingData, tileRows), ASIM_FIELD(BnTilingData, tileCols), ASIM_FIELD(BnTilingData, tilePitch),
    ASIM_FIELD(BnTilingData, accElems), ASIM_FIELD(BnTilingData, channelsPerTile),
    ASIM_FIELD(BnTilingData, channelBlocks), ASIM_FIELD(BnTilingData, rowTiles), ASIM_FIELD(BnTilingData, colTiles),
    ASIM_FIELD(BnTilingData, segments), ASIM_FIELD(BnTilingData, usedCores), ASIM_FIELD(BnTilingData, tasks),
    ASIM_FIELD(BnTilingData, stageChannels), ASIM_FIELD(BnTilingData, inputG), ASIM_FIELD(BnTilingData, weightG),
    ASIM_FIELD(BnTilingData, biasG),

    ASIM_SIZE(AsimBnTiling), ASIM_FIELD(AsimBnTiling, data), ASIM_FIELD(AsimBnTiling, tiling_key),
    ASIM_FIELD(AsimBnTiling, block_dim), ASIM_FIELD(AsimBnTiling, workspace_bytes),
    ASIM_FIELD(AsimBnTiling, ub_bytes_per_element), ASIM_FIELD(AsimBnTiling, fixed_ub_bytes),
    ASIM_FIELD(AsimBnTiling, error),

#define ASIM_CUBE_FIELD(f) ASIM_FIELD(TCubeTiling, f),
    ASIM_SIZE(TCubeTiling), ASCEND_OPS_TCUBETILING_FIELDS(ASIM_CUBE_FIELD)
#undef ASIM_CUBE_FIELD

    ASIM_SIZE(FlceTilingData), ASIM_FIELD(FlceTilingData, bt), ASIM_FIELD(FlceTilingData, h),
    ASIM_FIELD(FlceTilingData, v), ASIM_FIELD(FlceTilingData, rowBlocks), ASIM_FIELD(FlceTilingData, colBlocks),
    ASIM_FIELD(FlceTilingData, rowBlock), ASIM_FIELD(FlceTilingData, colBlock), ASIM_FIELD(FlceTilingData, cubeCores),
    ASIM_FIELD(FlceTilingData, mode), ASIM_FIELD(FlceTilingData, windowRowBlocks),
    ASIM_FIELD(FlceTilingData, windowColBlocks), ASIM_FIELD(FlceTilingData, windowRows),
    ASIM_FIELD(FlceTilingData, windowCols), ASIM_FIELD(FlceTilingData, windows), ASIM_FIELD(FlceTilingData, tileM),
    ASIM_FIELD(FlceTilingData, tileN), ASIM_FIELD(FlceTilingData, hTiles), ASIM_FIELD(FlceTilingData, groupRowBlocks),
    ASIM_FIELD(FlceTilingData, gTileRows), ASIM_FIELD(FlceTilingData, chunkCols),
    ASIM_FIELD(FlceTilingData, castRows), ASIM_FIELD(FlceTilingData, castCols), ASIM_FIELD(FlceTilingData, options),
    ASIM_FIELD(FlceTilingData, logitScale), ASIM_FIELD(FlceTilingData, softcap),
    ASIM_FIELD(FlceTilingData, ringBytes), ASIM_FIELD(FlceTilingData, logitsSlotBytes),
    ASIM_FIELD(FlceTilingData, gOffset), ASIM_FIELD(FlceTilingData, gWindowBytes),
    ASIM_FIELD(FlceTilingData, accOffset), ASIM_FIELD(FlceTilingData, reportOffset),
    ASIM_FIELD(FlceTilingData, userWorkspaceBytes), ASIM_FIELD(FlceTilingData, logitsMm),
    ASIM_FIELD(FlceTilingData, inputGradMm), ASIM_FIELD(FlceTilingData, weightGradMm),

    ASIM_SIZE(AsimFlceModel), ASIM_FIELD(AsimFlceModel, cube_flops), ASIM_FIELD(AsimFlceModel, roofline_s),
    ASIM_FIELD(AsimFlceModel, modelled_s), ASIM_FIELD(AsimFlceModel, cube_bound_s),
    ASIM_FIELD(AsimFlceModel, vector_bound_s), ASIM_FIELD(AsimFlceModel, hbm_bound_s),
    ASIM_FIELD(AsimFlceModel, l2_bound_s), ASIM_FIELD(AsimFlceModel, fill_s), ASIM_FIELD(AsimFlceModel, drain_s),
    ASIM_FIELD(AsimFlceModel, mmad_s), ASIM_FIELD(AsimFlceModel, operand_wait_s), ASIM_FIELD(AsimFlceModel, calls),
    ASIM_FIELD(AsimFlceModel, max_core_calls), ASIM_FIELD(AsimFlceModel, hbm_read_bytes),
    ASIM_FIELD(AsimFlceModel, hbm_write_bytes), ASIM_FIELD(AsimFlceModel, l2_read_bytes),
    ASIM_FIELD(AsimFlceModel, l2_write_bytes), ASIM_FIELD(AsimFlceModel, vector_repeats), ASIM_FIELD(AsimFlceModel, atomic_add_bytes),
    ASIM_FIELD(AsimFlceModel, atomic_rmw_lines), ASIM_FIELD(AsimFlceModel, max_line_adders),
    ASIM_FIELD(AsimFlceModel, steps), ASIM_FIELD(AsimFlceModel, footprint_bytes),
    ASIM_FIELD(AsimFlceModel, line_bytes), ASIM_FIELD(AsimFlceModel, l2_lines),

    ASIM_SIZE(AsimFlceTiling), ASIM_FIELD(AsimFlceTiling, data), ASIM_FIELD(AsimFlceTiling, block_dim),
    ASIM_FIELD(AsimFlceTiling, tiling_key), ASIM_FIELD(AsimFlceTiling, sys_workspace_bytes),
    ASIM_FIELD(AsimFlceTiling, workspace_bytes), ASIM_FIELD(AsimFlceTiling, error),
};

}  // namespace

extern "C" {

// sizeof(type) when field is "", else offsetof(type, field); -1 when the library does
// not know that struct or field.
int64_t asim_layout(const char* type, const char* field) {
  for (const LayoutEntry& e : kLayout)
    if (std::strcmp(e.type, type) == 0 && std::strcmp(e.field, field) == 0) return static_cast<int64_t>(e.value);
  return -1;
}

// The Atlas A2 (910B) description the tilings and the simulator use.
void asim_platform_910b(PlatformFacts* out) { *out = ascend_ops_kernels::kAscend910B; }

}  // extern "C"
