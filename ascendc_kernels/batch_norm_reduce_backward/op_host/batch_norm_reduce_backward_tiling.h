// Host tiling of batch_norm_reduce_backward: a pure function of the shape, the dtypes
// and the platform facts, unit tested on CPU and called unchanged by the CANN
// TilingFunc (batch_norm_reduce_backward_def.cpp) and the simulator's host binding.
#pragma once

#include <cstdint>
#include <string>

#include "../../common/platform.h"
#include "../op_kernel/batch_norm_reduce_backward_tiling_data.h"

namespace ascend_ops_kernels {

// The sums' dtype: float16 when input and statistics are both float16 (torch_npu's rule).
inline bool BnOutputHalf(uint32_t inputDtype, uint32_t statDtype) {
  return inputDtype == kFloat16 && statDtype == kFloat16;
}

struct BatchNormReduceBackwardShape {
  uint64_t n, c, s;       // input [N, C, *] with S the product of the trailing dims
  uint32_t inputDtype;    // DtypeCode of grad_out and input
  uint32_t statDtype;     // DtypeCode of mean and invstd (the sums are float16 when both are float16)
  bool inputG, weightG, biasG;
};

struct BatchNormReduceBackwardTiling {
  BatchNormReduceBackwardTilingData data;
  uint64_t tilingKey;      // inputDtype + 3 * statDtype
  uint32_t blockDim;       // >= 1 even for an empty input (every channel's sums are written)
  uint64_t workspaceBytes; // partial sums when a channel is split across cores
  std::string error;       // non-empty: the shape cannot be tiled (and why)
};

// UB layout per vector core (bytes), the constants the kernel allocates with:
constexpr uint32_t kBnBufferNum = 2;          // double-buffered input queues
constexpr uint32_t kBnStageChannels = 256;    // results staged before a copy-out
constexpr uint32_t kBnMaxSegments = 64;       // a channel is split over at most this many cores
constexpr uint32_t kBnMaxBlockCount = 4095;   // DataCopyPad blockCount limit
constexpr uint32_t kBnMinBurstBytes = 512;    // shorter channel runs are grouped K to a tile

// Fixed UB the kernel takes besides the per-element buffers: 4 fp32 + 4 half staging
// rows, the partials stage, the combine buffer, ReduceSum results, and the ReduceSum
// scratch (one float per 64 accumulator lanes; 1/16 byte per element, charged as 1).
inline uint32_t BnFixedUbBytes() {
  return 4 * kBnStageChannels * 4 + 4 * kBnStageChannels * 2 + 2 * kBnStageChannels * 4 +
         kBnMaxSegments * 32 + 64;
}

// UB bytes per accumulator element: 2 inputs x kBnBufferNum x the input dtype, fp32
// copies of both inputs for half dtypes, two fp32 accumulators, the per-lane mean (used
// when a tile spans several channels), the ReduceSum scratch.
inline uint32_t BnUbBytesPerElement(uint32_t inputDtype, bool meanTile) {
  const uint32_t in = DtypeBytes(inputDtype);
  return 2 * kBnBufferNum * in + (inputDtype == kFloat32 ? 0 : 2 * 4) + 2 * 4 + (meanTile ? 4 : 0) + 1;
}

inline BatchNormReduceBackwardTiling TileBatchNormReduceBackward(const BatchNormReduceBackwardShape& shape,
                                                                 const PlatformFacts& platform) {
  BatchNormReduceBackwardTiling t{};
  BatchNormReduceBackwardTilingData& d = t.data;
  if (shape.c == 0) { t.error = "C must be >= 1"; return t; }
  if (shape.inputDtype > kBFloat16) { t.error = "input dtype must be float32, float16 or bfloat16"; return t; }
  if (shape.statDtype > kBFloat16) { t.error = "mean/invstd dtype must be float32, float16 or bfloat16"; return t; }
  const uint32_t elem = DtypeBytes(shape.inputDtype);
  const uint32_t align = platform.blockBytes / elem;             // elements per 32 bytes
  const uint32_t lanes = platform.repeatBytes / 4;               // fp32 elements per repeat
  const uint64_t fixed = BnFixedUbBytes();

  d.n = shape.n; d.c = shape.c; d.s = shape.s;
  const uint64_t s = Max(shape.s, 1);
  // Short channel runs: group K channels per tile so a burst is >= kBnMinBurstBytes.
  uint64_t k = 1;
  if (s * elem < kBnMinBurstBytes) k = Min(Min(CeilDiv(kBnMinBurstBytes, s * elem), shape.c), kBnStageChannels);
  // Accumulator lanes UB can hold. Worked example (910B, float32, K = 1):
  // (196608 - 10304) / 25 = 7452 -> 7424 lanes.
  const uint64_t capacity =
      (platform.ubBytes - fixed) / BnUbBytesPerElement(shape.inputDtype, k > 1) / lanes * lanes;
  const uint64_t pitch = RoundUpTo(k * s, align);
  if (pitch <= capacity) {  // whole rows per tile
    d.tileCols = static_cast<uint32_t>(k * s);
    d.tilePitch = static_cast<uint32_t>(pitch);
    d.tileRows = static_cast<uint32_t>(Max(1, Min(Min(capacity / pitch, kBnMaxBlockCount), Max(shape.n, 1))));
  } else {  // a row is cut into column tiles
    d.tileCols = static_cast<uint32_t>(capacity);
    d.tilePitch = static_cast<uint32_t>(capacity);
    d.tileRows = 1;
  }
  d.channelsPerTile = static_cast<uint32_t>(k);
  d.channelBlocks = static_cast<uint32_t>(CeilDiv(shape.c, k));
  d.accElems = d.tileRows * d.tilePitch;
  const bool empty = shape.n == 0 || shape.s == 0;
  d.rowTiles = empty ? 0 : CeilDiv(shape.n, d.tileRows);
  d.colTiles = empty ? 0 : CeilDiv(k * s, d.tileCols);
  const uint64_t tilesPerBlock = d.rowTiles * d.colTiles;

  // Split channel blocks across cores; when there are fewer blocks than cores, split
  // each block's tiles too so every core has work.
  const uint64_t cores = platform.vectorCores;
  uint64_t segments = 1;
  if (d.channelBlocks < cores && tilesPerBlock > 1)
    segments = Min(Min(CeilDiv(cores, d.channelBlocks), tilesPerBlock), kBnMaxSegments);
  d.segments = static_cast<uint32_t>(segments);
  d.tasks = d.channelBlocks * segments;
  d.usedCores = static_cast<uint32_t>(Min(cores, d.tasks));
  d.stageChannels = kBnStageChannels;
  d.inputG = shape.inputG; d.weightG = shape.weightG; d.biasG = shape.biasG;

  // GM strides must fit DataCopyPad's 32-bit byte strides.
  if ((shape.c * shape.s) * elem > 0xffffffffull) { t.error = "C x S too large for a 32-bit DataCopyPad stride"; return t; }
  t.tilingKey = shape.inputDtype + 3 * shape.statDtype;
  t.blockDim = d.usedCores;
  t.workspaceBytes = segments > 1 ? segments * shape.c * 2 * sizeof(float) : 0;
  return t;
}

}  // namespace ascend_ops_kernels
