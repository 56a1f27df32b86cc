// Host tiling of fused_linear_cross_entropy_loss_grad, one MIX kernel (AIC:AIV = 1:2): a
// pure function of the shapes, dtypes, mode and platform facts. Unit tested on CPU
// (tests/test_ascendc_tiling.py). The CANN TilingFunc (…_def.cpp) calls it and adds the
// three Matmul tilings from CANN's MultiCoreMatmulTiling; the simulator runs what that
// TilingFunc produces (compiled on the host: ascendc_kernels/cann_host).
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
// calls, op_host/…_def.cpp): SetDim(1) (each task's Matmul runs on one cube core), A and B
// in GM, ND, half or bfloat16 (B transposed for the logits, A for Gᵀ·x_b), C fp32 in GM,
// SetShape = SetOrgShape = (m, n, k), SetFixSplit(baseM, baseN, baseK),
// SetTraverse(FIRSTM), no bias, SetBufferSpace(l1Budget). The library fills every
// TCubeTiling field from this; nothing here predicts its answer.
struct FlceMatmulRequest {
  int32_t m, n, k;
  int32_t baseM, baseN, baseK;
  uint64_t l1Budget;   // bytes of L1 the object may use
};

// Each object's L1 budget. All Matmul objects of one TPipe start at the same L1 (and L0C)
// address (asc-devkit impl/basic_api/kernel_tpipe_base.h, InitShareBufStart /
// AuxShareBufStart), so the budgets do not add up: each object uses the shared space in
// turn, and the kernel calls End() on one before the next loads (the simulator checks it).
// The TilingFunc passes min(budget, the L1 PlatformAscendC reports: 524032 bytes on A2/A3,
// 256 short of 512 KiB). These budgets keep stepM = stepN = 1 for every H (more L1 makes
// the library hold two N blocks of B per load, stepN 2, which the simulator does not model).
constexpr uint64_t kFlceLogitsL1 = 96 << 10, kFlceInputGradL1 = 128 << 10, kFlceWeightGradL1 = 96 << 10;

// What the three Matmuls' tilings need of the cube core's buffers (half operands, fp32
// C): each one's base blocks in L0A/L0B/L0C, and the largest L1 share (the objects share
// L1 from one address, see above). Empty when the platform's buffers hold them.
inline std::string FlceCubeBufferError(const AscendC::tiling::TCubeTiling* mms, int count, const PlatformFacts& platform) {
  uint64_t l1 = 0;
  for (int i = 0; i < count; ++i) {
    const AscendC::tiling::TCubeTiling& m = mms[i];
    const uint64_t l0a = uint64_t(m.baseM) * m.baseK * 2 * m.dbL0A, l0b = uint64_t(m.baseN) * m.baseK * 2 * m.dbL0B;
    const uint64_t l0c = uint64_t(m.baseM) * m.baseN * 4 * m.dbL0C;
    if (l0a > platform.l0aBytes) return "a Matmul base block needs " + std::to_string(l0a) + " bytes of L0A, the platform has " + std::to_string(platform.l0aBytes);
    if (l0b > platform.l0bBytes) return "a Matmul base block needs " + std::to_string(l0b) + " bytes of L0B, the platform has " + std::to_string(platform.l0bBytes);
    if (l0c > platform.l0cBytes) return "a Matmul base block needs " + std::to_string(l0c) + " bytes of L0C, the platform has " + std::to_string(platform.l0cBytes);
    l1 = Max(l1, uint64_t(m.shareL1Size));
  }
  if (l1 > platform.l1Bytes) return "a Matmul needs " + std::to_string(l1) + " bytes of L1, the platform has " + std::to_string(platform.l1Bytes);
  return "";
}

// The three requests for a hidden size h >= 1 (the shapes are a task's; the last tasks
// use part of them through SetSingleShape). A fixed baseN is the only N factor the library
// tries, and it gives up (GetTiling -1) when baseN exceeds N rounded up to the 16-row
// fractal (matmul_tiling_algorithm.cpp, :403-404 / :436-437), so baseN is clamped to
// RoundUp(h, 16); M and K are the task's own block sizes, which the fixed baseM covers
// exactly. The fixed baseK is a hint the library does not impose (it lowers it for a
// small K, and may raise it).
inline void FlceMatmulRequests(int32_t h, FlceMatmulRequest (&out)[3]) {
  const int32_t rb = kFlceRowBlock, cb = kFlceColBlock;
  const int32_t hBlock = static_cast<int32_t>(RoundUpTo(uint64_t(Max(h, 1)), 16));
  out[0] = FlceMatmulRequest{rb, cb, h, 128, 256, 64, kFlceLogitsL1};                                   // x_b · w_bᵀ
  out[1] = FlceMatmulRequest{rb, h, cb, 128, static_cast<int32_t>(Min(256, hBlock)), 64, kFlceInputGradL1};   // G · w_b
  out[2] = FlceMatmulRequest{cb, h, rb, 256, static_cast<int32_t>(Min(128, hBlock)), 64, kFlceWeightGradL1};  // Gᵀ · x_b
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
  // The three Matmul tilings (logitsMm, inputGradMm, weightGradMm) are left zero: the
  // TilingFunc fills them from CANN's MultiCoreMatmulTiling (FlceMatmulRequests) and
  // checks them with FlceCubeBufferError; the simulator runs the tiling data it produced.
  t.blockDim = d.cubeCores;
  t.tilingKey = shape.mode + 2 * (shape.dtype == kBFloat16) + 4 * shape.target64;
  t.sysWorkspaceBytes = empty ? 0 : kFlceSysWorkspaceBytes;
  t.workspaceBytes = empty ? 0 : t.sysWorkspaceBytes + d.userWorkspaceBytes;
  return t;
}

}  // namespace ascend_ops_kernels
