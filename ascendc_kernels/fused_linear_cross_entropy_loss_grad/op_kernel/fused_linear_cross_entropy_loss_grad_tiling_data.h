// Tiling of the fused_linear_cross_entropy_loss_grad MIX kernel (see op_host/…_tiling.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel_tiling/kernel_tiling.h"  // AscendC::tiling::TCubeTiling (CANN's, or the simulator's)

// FusedLinearCrossEntropyLossGradTilingData::options bits.
enum FlceOption : uint32_t {
  kFlceOptCoefficients = 1,  // options on: alpha, beta, gamma given (the others need it)
  kFlceOptBias = 2,          // bias [V] given (memory-saving: added to the recomputed logits)
  kFlceOptClassWeight = 4,   // class_weight [V] given (gamma term gamma·w_j, else gamma)
  kFlceOptSoftcap = 8,       // softcap > 0 (memory-saving only: needs the logits)
  kFlceOptScale = 16,        // logitScale != 1
};

struct FusedLinearCrossEntropyLossGradTilingData {
  uint64_t bt, h, v;
  uint64_t rowBlocks, colBlocks;  // ceil(BT / rowBlock), ceil(V / colBlock): the logits tasks' grid
  uint32_t rowBlock, colBlock;    // a logits task: rowBlock rows x colBlock vocabulary columns
  uint32_t cubeCores;             // the launch's blockDim (AIC cores; 2 AIV each)
  uint32_t mode;                  // 0 memory-saving (logits from x·wᵀ), 1 high-performance (softmax given)
  // Memory-saving mode: windows of windowRowBlocks x windowColBlocks tasks, row-major
  // (…_schedule.h), sized for L2 by the tiling; windowRows x windowCols = windows of them.
  uint32_t windowRowBlocks, windowColBlocks;
  uint64_t windowRows, windowCols, windows;
  // The backward GEMMs' output tiles (tileM x tileN of input_grad / weight_grad, hTiles of
  // them across H), in groups of groupRowBlocks tile rows (…_schedule.h).
  uint32_t tileM, tileN;
  uint64_t hTiles;
  uint32_t groupRowBlocks;
  uint32_t gTileRows;             // memory-saving: rows of a logits block one AIV turns into G per UB tile
  uint32_t chunkCols;             // high-performance: softmax columns per UB chunk of the G pass
  uint32_t castRows, castCols;    // accumulator tile of the final cast (memory-saving)
  // The loss options (SPEC §7; key bit 8, FlceOption bits below; 0 for the plain op): G
  // from the per-row coefficients alpha, beta, gamma [BT] instead of grad, the logits
  // recomputed with bias, logitScale and softcap (memory-saving), the class weights in the
  // gamma term and the soft-cap / scale derivative (…_g_stage.h).
  uint32_t options;
  float logitScale, softcap;      // softcap: the cap (> 0) when kFlceOptSoftcap
  // User workspace (bytes from GetUserWorkspace): per cube core a ring of two fp32 logits
  // slots (memory-saving), then two window G buffers (gWindowBytes each, row pitch
  // windowColBlocks x colBlock), then the fp32 accumulators [BT, H] (input_grad) and [V, H]
  // (weight_grad), adjacent (memory-saving); then one int64 per vector core: the first row
  // whose unmasked target lies outside [0, V), or -1 (both modes).
  uint64_t ringBytes, logitsSlotBytes;
  uint64_t gOffset, gWindowBytes;
  uint64_t accOffset, reportOffset, userWorkspaceBytes;
  // The three Matmuls' tilings, whole (the host writes them with CANN's
  // MultiCoreMatmulTiling::GetTiling; the AIC passes them to MatmulImpl::Init).
  AscendC::tiling::TCubeTiling logitsMm;      // logits = x_b · w_bᵀ            [rowBlock, colBlock], K = H
  AscendC::tiling::TCubeTiling inputGradMm;   // input_grad tile (+)= G · w      [tileM, tileN], K = a window's V (all V)
  AscendC::tiling::TCubeTiling weightGradMm;  // weight_grad tile (+)= Gᵀ · x    [tileM, tileN], K = a window's BT (all BT)
};

// TCubeTiling as CANN's kernel_tiling.h lays it out (50 int32_t fields in this order):
// compiled against the real header by ascendc-check, against the simulator's by its build,
// so the two agree field by field.
#define FLCE_CUBE_FIELD(name, index)                                                      \
  static_assert(offsetof(AscendC::tiling::TCubeTiling, name) == 4 * (index),              \
                "TCubeTiling::" #name " is not where CANN's kernel_tiling.h puts it");
FLCE_CUBE_FIELD(usedCoreNum, 0) FLCE_CUBE_FIELD(M, 1) FLCE_CUBE_FIELD(N, 2) FLCE_CUBE_FIELD(Ka, 3)
FLCE_CUBE_FIELD(Kb, 4) FLCE_CUBE_FIELD(singleCoreM, 5) FLCE_CUBE_FIELD(singleCoreN, 6)
FLCE_CUBE_FIELD(singleCoreK, 7) FLCE_CUBE_FIELD(baseM, 8) FLCE_CUBE_FIELD(baseN, 9)
FLCE_CUBE_FIELD(baseK, 10) FLCE_CUBE_FIELD(depthA1, 11) FLCE_CUBE_FIELD(depthB1, 12)
FLCE_CUBE_FIELD(stepM, 13) FLCE_CUBE_FIELD(stepN, 14) FLCE_CUBE_FIELD(isBias, 15)
FLCE_CUBE_FIELD(transLength, 16) FLCE_CUBE_FIELD(iterateOrder, 17) FLCE_CUBE_FIELD(shareMode, 18)
FLCE_CUBE_FIELD(shareL1Size, 19) FLCE_CUBE_FIELD(shareL0CSize, 20) FLCE_CUBE_FIELD(shareUbSize, 21)
FLCE_CUBE_FIELD(batchM, 22) FLCE_CUBE_FIELD(batchN, 23) FLCE_CUBE_FIELD(singleBatchM, 24)
FLCE_CUBE_FIELD(singleBatchN, 25) FLCE_CUBE_FIELD(stepKa, 26) FLCE_CUBE_FIELD(stepKb, 27)
FLCE_CUBE_FIELD(depthAL1CacheUB, 28) FLCE_CUBE_FIELD(depthBL1CacheUB, 29) FLCE_CUBE_FIELD(dbL0A, 30)
FLCE_CUBE_FIELD(dbL0B, 31) FLCE_CUBE_FIELD(dbL0C, 32) FLCE_CUBE_FIELD(ALayoutInfoB, 33)
FLCE_CUBE_FIELD(ALayoutInfoS, 34) FLCE_CUBE_FIELD(ALayoutInfoN, 35) FLCE_CUBE_FIELD(ALayoutInfoG, 36)
FLCE_CUBE_FIELD(ALayoutInfoD, 37) FLCE_CUBE_FIELD(BLayoutInfoB, 38) FLCE_CUBE_FIELD(BLayoutInfoS, 39)
FLCE_CUBE_FIELD(BLayoutInfoN, 40) FLCE_CUBE_FIELD(BLayoutInfoG, 41) FLCE_CUBE_FIELD(BLayoutInfoD, 42)
FLCE_CUBE_FIELD(CLayoutInfoB, 43) FLCE_CUBE_FIELD(CLayoutInfoS1, 44) FLCE_CUBE_FIELD(CLayoutInfoN, 45)
FLCE_CUBE_FIELD(CLayoutInfoG, 46) FLCE_CUBE_FIELD(CLayoutInfoS2, 47) FLCE_CUBE_FIELD(BatchNum, 48)
FLCE_CUBE_FIELD(mxTypePara, 49)
#undef FLCE_CUBE_FIELD
static_assert(sizeof(AscendC::tiling::TCubeTiling) == 4 * 50, "TCubeTiling is not CANN's 50 int32_t fields");
