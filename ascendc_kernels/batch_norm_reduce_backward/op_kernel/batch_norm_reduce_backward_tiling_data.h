// The tiling of batch_norm_reduce_backward: a POD struct the host fills and the kernel
// reads (GET_TILING_DATA_WITH_STRUCT). Lives beside the kernel because CANN's kernel
// build sees only op_kernel/.
#pragma once

#include <cstdint>

struct BatchNormReduceBackwardTilingData {
  // input viewed as [N, C, S]: channel c of row n is the contiguous run at (n*C + c)*S.
  uint64_t n;
  uint64_t c;
  uint64_t s;
  // One channel's [N, S] plane is cut into tiles of tileRows x tileCols elements. A tile
  // with tileRows > 1 holds whole rows (tileCols == S); a row longer than UB allows is cut
  // into column tiles with tileRows == 1. In UB each tile row is padded to tilePitch
  // elements (32 bytes) with zeros, which add nothing to either sum.
  uint32_t tileRows;
  uint32_t tileCols;
  uint32_t tilePitch;
  uint32_t accElems;  // tileRows * tilePitch: the fp32 lane accumulators
  uint64_t rowTiles;
  uint64_t colTiles;
  // Work split: task = (channel, segment); segment k of a channel takes tiles
  // [k*T/segments, (k+1)*T/segments) of its T = rowTiles*colTiles. Block b runs tasks
  // [b*tasks/usedCores, (b+1)*tasks/usedCores). With segments > 1 the blocks write
  // partial sums to the workspace, SyncAll, then each combines a range of channels in
  // segment order: the result never depends on timing.
  uint32_t segments;
  uint32_t usedCores;
  uint64_t tasks;
  uint32_t stageChannels;  // per-channel results collected in UB before one copy-out
  uint32_t inputG;
  uint32_t weightG;
  uint32_t biasG;
};
