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
  bool maskPacked;       // bit-packed uint8 (required: the kernel reads bits)
  bool target64;         // int64 masked_target (else int32)
};

struct FusedLinearCrossEntropyLossGradTiling {
  FusedLinearCrossEntropyLossGradTilingData data;
  uint32_t blockDim;           // cube cores to launch (0 when BT = 0 or H = 0: nothing to launch)
  uint64_t tilingKey;          // mode + 2*(dtype is bf16) + 4*target64
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

// One Matmul of the kernel as CANN's MultiCoreMatmulTiling is told it (the TilingFunc's
// calls): SetDim(1) (each task's Matmul runs on one cube core), A and B in GM, ND, half
// or bfloat16 (B transposed for the logits), C fp32 in GM, SetShape = SetOrgShape =
// (m, n, k), SetFixSplit(baseM, baseN, baseK), SetTraverse(FIRSTM), no bias, and
// SetBufferSpace(l1Budget): the object's share of L1 (the three objects live in L1 at once).
struct FlceMatmulRequest {
  int32_t m, n, k;
  int32_t baseM, baseN, baseK;
  uint32_t elemBytes;  // A and B
  uint64_t l1Budget;   // bytes
};

// The TCubeTiling MultiCoreMatmulTiling::GetTiling gives for such a request on A2/A3, by
// the rules it applies to it (asc-devkit impl/adv_api/tiling/matmul), in our own code:
// - one core: usedCoreNum 1, singleCore = the shape, M/N/Ka/Kb = the org shape;
// - the fixed base block; L0A (L0B) double-buffered unless baseM (baseN) 32-byte rows
//   take more than half of it, L0C double-buffered unless baseM x baseN x 32 bytes do;
// - L1: B is loaded one baseK step at a time, double-buffered (stepKb 1, depthB1 2); A
//   keeps all of K resident when its whole panel fits the budget beside B's two steps
//   (stepKa = depthA1 = K / baseK: loaded once per M block), else one step at a time,
//   double-buffered; one M and N block per load (stepM = stepN = 1);
// - iterateOrder 0 (FIRSTM); shareL1Size = the A and B buffers, shareL0CSize one L0C
//   block, shareUbSize and transLength 0 (A2/A3 move ND data into L1 without UB).
// What the library would choose beyond these rules (another stepKa, stepM > 1) is not
// reproduced; the real call replaces this result on the NPU (op_host/…_def.cpp) and the
// simulator checks whichever tiling it is given (sim/src/matmul.cpp CheckCubeTiling).
inline AscendC::tiling::TCubeTiling FlceCubeTiling(const FlceMatmulRequest& r, const PlatformFacts& platform) {
  AscendC::tiling::TCubeTiling t{};
  t.usedCoreNum = 1;
  t.M = r.m; t.N = r.n; t.Ka = r.k; t.Kb = r.k;
  t.singleCoreM = r.m; t.singleCoreN = r.n; t.singleCoreK = r.k;
  t.baseM = r.baseM; t.baseN = r.baseN; t.baseK = r.baseK;
  constexpr int64_t kC0Bytes = 32;
  t.dbL0A = int64_t(r.baseM) * kC0Bytes > platform.l0aBytes / 2 ? 1 : 2;
  t.dbL0B = int64_t(r.baseN) * kC0Bytes > platform.l0bBytes / 2 ? 1 : 2;
  t.dbL0C = int64_t(r.baseM) * r.baseN * kC0Bytes > platform.l0cBytes / 2 ? 1 : 2;
  const uint64_t aStep = uint64_t(r.baseM) * r.baseK * r.elemBytes, bStep = uint64_t(r.baseN) * r.baseK * r.elemBytes;
  const int32_t kSteps = static_cast<int32_t>(CeilDiv(uint64_t(Max(r.k, 1)), uint64_t(r.baseK)));
  t.stepM = 1; t.stepN = 1;
  t.stepKb = 1; t.depthB1 = 2;
  const bool aResident = kSteps > 1 && uint64_t(kSteps) * aStep + 2 * bStep <= r.l1Budget;
  t.stepKa = aResident ? kSteps : 1;
  t.depthA1 = aResident ? kSteps : 2;
  t.iterateOrder = 0;
  t.shareMode = 0;
  t.shareL1Size = static_cast<int32_t>(uint64_t(t.depthA1) * aStep + uint64_t(t.depthB1) * bStep);
  t.shareL0CSize = r.baseM * r.baseN * 4;
  t.batchM = t.batchN = t.singleBatchM = t.singleBatchN = 1;
  return t;
}

// The L1 share of each of the three Matmuls (SetBufferSpace): together 320 KiB of the 512.
constexpr uint64_t kFlceLogitsL1 = 96 << 10, kFlceInputGradL1 = 128 << 10, kFlceWeightGradL1 = 96 << 10;

// What the three Matmuls need of the cube core's buffers (half operands, fp32 C): each
// one's base blocks in L0A/L0B/L0C, and all three objects' L1 together (they are
// initialised at once). Empty when the platform's buffers hold them.
inline std::string FlceCubeBufferError(const AscendC::tiling::TCubeTiling* mms, int count, const PlatformFacts& platform) {
  uint64_t l1 = 0;
  for (int i = 0; i < count; ++i) {
    const AscendC::tiling::TCubeTiling& m = mms[i];
    const uint64_t l0a = uint64_t(m.baseM) * m.baseK * 2 * m.dbL0A, l0b = uint64_t(m.baseN) * m.baseK * 2 * m.dbL0B;
    const uint64_t l0c = uint64_t(m.baseM) * m.baseN * 4 * m.dbL0C;
    if (l0a > platform.l0aBytes) return "a Matmul base block needs " + std::to_string(l0a) + " bytes of L0A, the platform has " + std::to_string(platform.l0aBytes);
    if (l0b > platform.l0bBytes) return "a Matmul base block needs " + std::to_string(l0b) + " bytes of L0B, the platform has " + std::to_string(platform.l0bBytes);
    if (l0c > platform.l0cBytes) return "a Matmul base block needs " + std::to_string(l0c) + " bytes of L0C, the platform has " + std::to_string(platform.l0cBytes);
    l1 += uint64_t(m.shareL1Size);
  }
  if (l1 > platform.l1Bytes) return "the Matmuls need " + std::to_string(l1) + " bytes of L1, the platform has " + std::to_string(platform.l1Bytes);
  return "";
}

// The three requests for a hidden size h (the shapes are a task's, the last tasks use
// part of them through SetSingleShape).
inline void FlceMatmulRequests(int32_t h, uint32_t elemBytes, FlceMatmulRequest (&out)[3]) {
  const int32_t rb = kFlceRowBlock, cb = kFlceColBlock;
  out[0] = FlceMatmulRequest{rb, cb, h, 128, 256, 64, elemBytes, kFlceLogitsL1};      // x_b · w_bᵀ
  out[1] = FlceMatmulRequest{rb, h, cb, 128, 256, 64, elemBytes, kFlceInputGradL1};   // G · w_b
  out[2] = FlceMatmulRequest{cb, h, rb, 256, 128, 64, elemBytes, kFlceWeightGradL1};  // Gᵀ · x_b
}

inline FusedLinearCrossEntropyLossGradTiling TileFusedLinearCrossEntropyLossGrad(
    const FusedLinearCrossEntropyLossGradShape& shape, const PlatformFacts& platform) {
  FusedLinearCrossEntropyLossGradTiling t{};
  if (shape.dtype != kFloat16 && shape.dtype != kBFloat16) { t.error = "input dtype must be float16 or bfloat16"; return t; }
  if (shape.mode > kHighPerformance) { t.error = "unknown mode"; return t; }
  if (!shape.maskPacked) {  // the kernel reads bits; a bool mask is packed by the caller first
    t.error = "target_mask must be bit-packed uint8 (pack a bool mask first)";
    return t;
  }
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
  // H = 0 launches nothing; the tilings still describe a 1-wide Matmul (positive shapes).
  const int32_t h = static_cast<int32_t>(Max(shape.h, 1));
  FlceMatmulRequest requests[3];
  FlceMatmulRequests(h, static_cast<uint32_t>(e), requests);
  d.logitsMm = FlceCubeTiling(requests[0], platform);
  d.inputGradMm = FlceCubeTiling(requests[1], platform);
  d.weightGradMm = FlceCubeTiling(requests[2], platform);
  const AscendC::tiling::TCubeTiling mms[] = {d.logitsMm, d.inputGradMm, d.weightGradMm};
  t.error = FlceCubeBufferError(mms, 3, platform);
  if (!t.error.empty()) return t;
  t.blockDim = d.cubeCores;
  t.tilingKey = shape.mode + 2 * (shape.dtype == kBFloat16) + 4 * shape.target64;
  t.sysWorkspaceBytes = empty ? 0 : kFlceSysWorkspaceBytes;
  t.workspaceBytes = empty ? 0 : t.sysWorkspaceBytes + d.userWorkspaceBytes;
  return t;
}

}  // namespace ascend_ops_kernels
