// Tiling of the fused_linear_cross_entropy_loss_grad MIX kernel (see op_host/…_tiling.h).
#pragma once

#include <cstdint>

// The fields of one Matmul's TCubeTiling the host fills (same names and order as the
// TCubeTiling fields the kernel copies them into).
struct FlceMatmulTiling {
  int32_t usedCoreNum, M, N, Ka, Kb, singleCoreM, singleCoreN, singleCoreK, baseM, baseN, baseK;
  int32_t depthA1, depthB1, stepM, stepN, isBias, iterateOrder, stepKa, stepKb, dbL0A, dbL0B, dbL0C;
};

struct FusedLinearCrossEntropyLossGradTilingData {
  uint64_t bt, h, v;
  uint64_t rowBlocks, colBlocks;  // ceil(BT / rowBlock), ceil(V / colBlock)
  uint64_t tasks;                 // rowBlocks x colBlocks; task t goes to cube core t % cubeCores
  uint32_t rowBlock, colBlock;    // a task: rowBlock rows x colBlock vocabulary columns
  uint32_t cubeCores;             // the launch's blockDim (AIC cores; 2 AIV each)
  uint32_t mode;                  // 0 memory-saving (logits from x·wᵀ), 1 high-performance (softmax given)
  uint32_t gTileRows;             // rows of a task one AIV turns into G per UB tile
  uint32_t castRows, castCols;    // accumulator tile of the zero fill and the final cast
  uint32_t reserved;
  // User workspace (bytes from GetUserWorkspace): per cube core a ring of two slots, each
  // an fp32 logits block (memory-saving mode) and a G block (input dtype); then the fp32
  // accumulators [BT, H] (input_grad) and [V, H] (weight_grad), adjacent.
  uint64_t ringBytes, logitsSlotBytes, gSlotBytes;
  uint64_t accOffset, userWorkspaceBytes;
  FlceMatmulTiling logitsMm;      // logits = x_b · w_bᵀ          [rowBlock, colBlock], K = H
  FlceMatmulTiling inputGradMm;   // input_grad_b += G · w_b      [rowBlock, H],        K = colBlock
  FlceMatmulTiling weightGradMm;  // weight_grad_b += Gᵀ · x_b    [colBlock, H],        K = rowBlock
};
