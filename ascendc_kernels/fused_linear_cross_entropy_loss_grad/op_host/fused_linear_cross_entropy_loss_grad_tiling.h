// Host tiling of fused_linear_cross_entropy_loss_grad, one MIX kernel (AIC:AIV = 1:2): a
// pure function of the shapes, dtypes, mode and platform facts. Unit tested on CPU
// (tests/test_ascendc_tiling.py); the simulator's host side and the CANN TilingFunc use it.
//
// The work is BT x V cut into tasks of kFlceRowBlock rows x kFlceColBlock vocabulary
// columns, dealt round-robin to the cube cores. Per task the cube computes the fp32
// logits block (memory-saving mode), its two vector cores turn it into G, and the cube
// adds G·w_b and Gᵀ·x_b into fp32 accumulators. The workspace holds a two-slot ring per
// cube core (bounded whatever BT and V are) and the accumulators; no [BT, V] buffer.
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
};

struct FusedLinearCrossEntropyLossGradTiling {
  FusedLinearCrossEntropyLossGradTilingData data;
  uint32_t blockDim;           // cube cores to launch (0 when BT = 0 or H = 0: nothing to launch)
  uint64_t tilingKey;          // mode + 2*(dtype is bf16) + 4*maskPacked + 8*target64
  uint64_t sysWorkspaceBytes;  // the Matmul library's system workspace, in front of ours
  uint64_t workspaceBytes;     // system + user
  std::string error;
};

constexpr uint32_t kFlceRowBlock = 128;  // rows of a task
constexpr uint32_t kFlceColBlock = 256;  // vocabulary columns of a task
constexpr uint32_t kFlceGTileRows = 32;  // UB: 2 x 32 x 256 x 4 (fp32 in) + 2 x 32 x 256 x 2 (G out) = 96 KiB
constexpr uint32_t kFlceCastElems = 2048;  // fp32 elements of an accumulator tile (8 KiB)
// CANN: platform_ascendc::PlatformAscendC::GetLibApiWorkSpaceSize() (16 MiB on A2/A3).
constexpr uint64_t kFlceSysWorkspaceBytes = 16ull << 20;
constexpr uint64_t kFlceWorkspaceAlign = 512;

// The three Matmuls' TCubeTilings. Base blocks obey the cube's fractal rules (multiples
// of 16 rows/columns, K a multiple of 16 half elements) and fit L0A/L0B (64 KiB, double
// buffered) and L0C (128 KiB fp32); their L1 depths together take 320 KiB of the 512.
inline FlceMatmulTiling FlceMm(int32_t m, int32_t n, int32_t k, int32_t baseM, int32_t baseN, int32_t stepKa) {
  FlceMatmulTiling t{};
  t.usedCoreNum = 1;
  t.M = m; t.N = n; t.Ka = k; t.Kb = k;
  t.singleCoreM = m; t.singleCoreN = n; t.singleCoreK = k;
  t.baseM = baseM; t.baseN = baseN; t.baseK = 64;
  t.stepM = 1; t.stepN = 1; t.stepKa = stepKa; t.stepKb = 1;
  t.depthA1 = stepKa == 1 ? 2 : stepKa;  // all of K resident when stepKa covers it, else double buffered
  t.depthB1 = 2;
  t.isBias = 0; t.iterateOrder = 0;
  t.dbL0A = 2; t.dbL0B = 2; t.dbL0C = 1;
  return t;
}

// What the three Matmuls need of the cube core's buffers (half operands, fp32 C): each
// one's base blocks in L0A/L0B/L0C, and all three objects' L1 depths together (they are
// registered at once). Empty when the platform's buffers hold them.
inline std::string FlceCubeBufferError(const FlceMatmulTiling* mms, int count, const PlatformFacts& platform) {
  uint64_t l1 = 0;
  for (int i = 0; i < count; ++i) {
    const FlceMatmulTiling& m = mms[i];
    const uint64_t l0a = uint64_t(m.baseM) * m.baseK * 2 * m.dbL0A, l0b = uint64_t(m.baseN) * m.baseK * 2 * m.dbL0B;
    const uint64_t l0c = uint64_t(m.baseM) * m.baseN * 4 * m.dbL0C;
    if (l0a > platform.l0aBytes) return "a Matmul base block needs " + std::to_string(l0a) + " bytes of L0A, the platform has " + std::to_string(platform.l0aBytes);
    if (l0b > platform.l0bBytes) return "a Matmul base block needs " + std::to_string(l0b) + " bytes of L0B, the platform has " + std::to_string(platform.l0bBytes);
    if (l0c > platform.l0cBytes) return "a Matmul base block needs " + std::to_string(l0c) + " bytes of L0C, the platform has " + std::to_string(platform.l0cBytes);
    l1 += (uint64_t(m.depthA1) * m.baseM + uint64_t(m.depthB1) * m.baseN) * m.baseK * 2;
  }
  if (l1 > platform.l1Bytes) return "the Matmuls need " + std::to_string(l1) + " bytes of L1, the platform has " + std::to_string(platform.l1Bytes);
  return "";
}

inline FusedLinearCrossEntropyLossGradTiling TileFusedLinearCrossEntropyLossGrad(
    const FusedLinearCrossEntropyLossGradShape& shape, const PlatformFacts& platform) {
  FusedLinearCrossEntropyLossGradTiling t{};
  if (shape.dtype != kFloat16 && shape.dtype != kBFloat16) { t.error = "input dtype must be float16 or bfloat16"; return t; }
  if (shape.mode > kHighPerformance) { t.error = "unknown mode"; return t; }
  if (shape.v == 0) { t.error = "V must be >= 1"; return t; }
  if (shape.h > (1u << 30) || shape.v > (1u << 30) || shape.bt > (1u << 30)) {
    t.error = "BT, H and V must each be below 2^30 (the Matmul shapes are 32-bit)";
    return t;
  }
  FusedLinearCrossEntropyLossGradTilingData& d = t.data;
  d.bt = shape.bt; d.h = shape.h; d.v = shape.v;
  d.rowBlock = kFlceRowBlock;
  d.colBlock = kFlceColBlock;
  d.rowBlocks = CeilDiv(shape.bt, kFlceRowBlock);
  d.colBlocks = CeilDiv(shape.v, kFlceColBlock);
  d.tasks = d.rowBlocks * d.colBlocks;
  // BT = 0 or H = 0: the outputs hold nothing to compute (weight_grad is zero or empty);
  // no launch, never one with blockDim 0.
  const bool empty = shape.bt == 0 || shape.h == 0;
  d.cubeCores = empty ? 0 : static_cast<uint32_t>(Min(platform.aiCores, d.tasks));
  d.mode = shape.mode;
  d.gTileRows = kFlceGTileRows;
  d.castCols = static_cast<uint32_t>(Max(1, Min(shape.h, kFlceCastElems)));
  d.castRows = static_cast<uint32_t>(Max(1, kFlceCastElems / RoundUpTo(d.castCols, 16)));
  const uint64_t e = DtypeBytes(shape.dtype);
  d.logitsSlotBytes = shape.mode == kMemorySaving ? uint64_t(kFlceRowBlock) * kFlceColBlock * 4 : 0;
  d.gSlotBytes = uint64_t(kFlceRowBlock) * kFlceColBlock * e;
  d.ringBytes = RoundUpTo(2 * (d.logitsSlotBytes + d.gSlotBytes), kFlceWorkspaceAlign);
  d.accOffset = uint64_t(d.cubeCores) * d.ringBytes;
  d.userWorkspaceBytes = d.accOffset + (shape.bt + shape.v) * shape.h * 4;
  const int32_t h = static_cast<int32_t>(shape.h);
  d.logitsMm = FlceMm(kFlceRowBlock, kFlceColBlock, h, 128, 256, 1);
  d.inputGradMm = FlceMm(kFlceRowBlock, h, kFlceColBlock, 128, 256, kFlceColBlock / 64);
  d.weightGradMm = FlceMm(kFlceColBlock, h, kFlceRowBlock, 256, 128, kFlceRowBlock / 64);
  const FlceMatmulTiling mms[] = {d.logitsMm, d.inputGradMm, d.weightGradMm};
  t.error = FlceCubeBufferError(mms, 3, platform);
  if (!t.error.empty()) return t;
  t.blockDim = d.cubeCores;
  t.tilingKey = shape.mode + 2 * (shape.dtype == kBFloat16) + 4 * shape.maskPacked + 8 * shape.target64;
  t.sysWorkspaceBytes = empty ? 0 : kFlceSysWorkspaceBytes;
  t.workspaceBytes = empty ? 0 : t.sysWorkspaceBytes + d.userWorkspaceBytes;
  return t;
}

}  // namespace ascend_ops_kernels
