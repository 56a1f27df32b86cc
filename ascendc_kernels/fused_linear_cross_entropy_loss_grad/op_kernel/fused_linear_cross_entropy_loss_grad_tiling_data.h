// Tiling of the logits-gradient vector kernel of fused_linear_cross_entropy_loss_grad:
// one launch turns `rows` rows of P (softmax, or logits to be normalised) into
// G = half((P − onehot(target)) · grad) for a chunk of rows starting at rowBegin.
#pragma once

#include <cstdint>

struct FusedLinearCrossEntropyLossGradTilingData {
  uint64_t rowBegin;   // first row of the chunk in the [BT] inputs
  uint64_t rows;       // rows in this chunk
  uint64_t v;          // vocabulary shard size: the row length of P and G
  uint64_t srcRowStride;  // elements between rows of the P source (V)
  uint32_t tileCols;   // columns per tile (a row is cut into colTiles tiles)
  uint32_t inTileBytes;   // UB bytes of one fp32 tile, rounded up to the 32-byte block
  uint32_t outTileBytes;  // the same for one tile of G
  uint32_t usedCores;
  uint64_t colTiles;
  uint64_t tasks;      // rows * colTiles; block b takes [b*tasks/usedCores, (b+1)*tasks/usedCores)
};
