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
  // A tile is tileRows rows x tileCols contiguous elements of one row, padded in UB to
  // tilePitch elements (32 bytes) with zeros, which add nothing to either sum.
  //  - channelsPerTile == 1: the tile is one channel's run (tileCols == S), or, for rows
  //    longer than UB allows, a column slice of it (tileRows == 1, colTiles > 1).
  //  - channelsPerTile == K > 1 (short rows, S*elem < 512 bytes): the tile spans K
  //    neighbouring channels (tileCols == K*S), so each DMA burst is long; the per-lane
  //    sums are folded over rows and then over each channel's S lanes.
  uint32_t tileRows;
  uint32_t tileCols;
  uint32_t tilePitch;
  uint32_t accElems;  // tileRows * tilePitch: the fp32 lane accumulators
  uint32_t channelsPerTile;
  uint32_t channelBlocks;  // ceil(C / channelsPerTile)
  uint64_t rowTiles;
  uint64_t colTiles;
  // Work split: task = (channel block, segment); segment k takes tiles
  // [k*T/segments, (k+1)*T/segments) of the block's T = rowTiles*colTiles. Block b runs
  // tasks [b*tasks/usedCores, (b+1)*tasks/usedCores). With segments > 1 the blocks write
  // partial sums to the workspace ([segment][channel][2] floats), SyncAll, then each
  // combines a range of channels in segment order: the result never depends on timing.
  uint32_t segments;
  uint32_t usedCores;
  uint64_t tasks;
  uint32_t stageChannels;  // per-channel results collected in UB before one copy-out
  uint32_t inputG;
  uint32_t weightG;
  uint32_t biasG;
};
