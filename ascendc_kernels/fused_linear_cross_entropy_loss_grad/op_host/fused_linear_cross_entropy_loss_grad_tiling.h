// Host tiling of fused_linear_cross_entropy_loss_grad: a pure function of the shapes,
// dtypes, mode and platform facts. It fixes the row chunks (so memory-saving mode never
// holds more than one chunk of logits), the workspace layout and, per chunk, the vector
// kernel's tiling. Unit tested on CPU; the simulator's host composition uses it as is.
#pragma once

#include <cstdint>
#include <string>

#include "../../common/platform.h"
#include "../op_kernel/fused_linear_cross_entropy_loss_grad_tiling_data.h"

namespace ascend_ops_kernels {

enum FlceMode : uint32_t { kMemorySaving = 0, kHighPerformance = 1 };

struct FusedLinearCrossEntropyLossGradShape {
  uint64_t bt, h, v;
  uint32_t dtype;        // kFloat16 or kBFloat16 (input, weight and both outputs)
  uint32_t mode;         // FlceMode
  bool maskPacked;       // bit-packed uint8 (else bool [BT])
  bool target64;         // int64 masked_target (else int32)
  uint64_t workspaceBudgetBytes;  // cap on the per-chunk buffers (0: the default)
};

struct FusedLinearCrossEntropyLossGradTiling {
  uint64_t chunkRows;      // rows per chunk (the last may be shorter)
  uint64_t chunks;
  // Workspace layout (bytes from its start): per-chunk logits (fp32, memory-saving mode
  // only), per-chunk G (input dtype), and the fp32 weight_grad accumulator when more than
  // one chunk contributes to it.
  uint64_t logitsOffset, gOffset, weightGradAccOffset, workspaceBytes;
  uint64_t tilingKey;      // mode + 2*(dtype is bf16) + 4*maskPacked + 8*target64
  std::string error;
};

constexpr uint32_t kFlceBufferNum = 2;
constexpr uint64_t kFlceDefaultBudget = 64ull << 20;  // 64 MiB of per-chunk buffers
constexpr uint32_t kFlceReservedUb = 1024;

// Columns per tile: an fp32 input queue and a half output queue, double buffered:
// 2 x 4 + 2 x 2 = 12 bytes per column. 910B: (196608 - 1024) / 12 = 16298 -> 16256.
inline uint32_t FlceTileCols(const PlatformFacts& platform) {
  const uint32_t lanes = platform.repeatBytes / 4;
  return (platform.ubBytes - kFlceReservedUb) / (kFlceBufferNum * (4 + 2)) / lanes * lanes;
}

inline FusedLinearCrossEntropyLossGradTiling TileFusedLinearCrossEntropyLossGrad(
    const FusedLinearCrossEntropyLossGradShape& shape, const PlatformFacts& /*platform*/) {
  FusedLinearCrossEntropyLossGradTiling t{};
  if (shape.dtype != kFloat16 && shape.dtype != kBFloat16) { t.error = "input dtype must be float16 or bfloat16"; return t; }
  if (shape.mode > kHighPerformance) { t.error = "unknown mode"; return t; }
  if (shape.v == 0) { t.error = "V must be >= 1"; return t; }
  const uint64_t budget = shape.workspaceBudgetBytes ? shape.workspaceBudgetBytes : kFlceDefaultBudget;
  // Per row of a chunk: fp32 logits (memory-saving mode) and G in the input dtype.
  const uint64_t perRow = shape.v * ((shape.mode == kMemorySaving ? 4 : 0) + 2);
  t.chunkRows = Max(1, Min(shape.bt, budget / perRow));
  t.chunks = shape.bt == 0 ? 0 : CeilDiv(shape.bt, t.chunkRows);
  const uint64_t align = 512;  // keep every workspace part 512-byte aligned
  t.logitsOffset = 0;
  const uint64_t logitsBytes = shape.mode == kMemorySaving ? RoundUpTo(t.chunkRows * shape.v * 4, align) : 0;
  t.gOffset = logitsBytes;
  t.weightGradAccOffset = t.gOffset + RoundUpTo(t.chunkRows * shape.v * 2, align);
  const uint64_t accBytes = t.chunks > 1 ? RoundUpTo(shape.v * shape.h * 4, align) : 0;
  t.workspaceBytes = shape.bt == 0 ? 0 : t.weightGradAccOffset + accBytes;
  t.tilingKey = shape.mode + 2 * (shape.dtype == kBFloat16) + 4 * shape.maskPacked + 8 * shape.target64;
  return t;
}

// The vector kernel's tiling for chunk `chunk`.
inline FusedLinearCrossEntropyLossGradTilingData TileFlceChunk(const FusedLinearCrossEntropyLossGradShape& shape,
                                                               const FusedLinearCrossEntropyLossGradTiling& t,
                                                               uint64_t chunk, const PlatformFacts& platform) {
  FusedLinearCrossEntropyLossGradTilingData d{};
  d.rowBegin = chunk * t.chunkRows;
  d.rows = Min(t.chunkRows, shape.bt - d.rowBegin);
  d.v = shape.v;
  d.srcRowStride = shape.v;
  d.tileCols = static_cast<uint32_t>(Min(FlceTileCols(platform), shape.v));
  d.inTileBytes = static_cast<uint32_t>(RoundUpTo(uint64_t(d.tileCols) * 4, platform.blockBytes));
  d.outTileBytes = static_cast<uint32_t>(RoundUpTo(uint64_t(d.tileCols) * DtypeBytes(shape.dtype), platform.blockBytes));
  d.colTiles = CeilDiv(shape.v, d.tileCols);
  d.tasks = d.rows * d.colTiles;
  d.usedCores = static_cast<uint32_t>(Min(platform.vectorCores, d.tasks));
  return d;
}

}  // namespace ascend_ops_kernels
