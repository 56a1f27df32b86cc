// Host tiling of fused_linear_cross_entropy_loss_grad, one MIX kernel (AIC:AIV = 1:2): a
// pure function of the shapes, dtypes, mode and platform facts. Unit tested on CPU
// (tests/test_ascendc_tiling.py). The CANN TilingFunc (…_def.cpp) calls it and adds the
// three Matmul tilings from CANN's MultiCoreMatmulTiling; the simulator runs what that
// TilingFunc produces (compiled on the host: ascendc_kernels/cann_host).
//
// Memory-saving mode: BT x V is cut into logits tasks of kFlceRowBlock rows x kFlceColBlock
// vocabulary columns, grouped into windows sized here for L2 (FlceWindowBlocks). Per window
// the cube cores compute the tasks' fp32 logits, their vector cores turn them into G in a
// window buffer, and then the cube cores compute the window's part of both backward GEMMs,
// output-stationary, into fp32 accumulators (the first window along K writes, the others
// add, one writer per tile and step). High-performance mode: the vector cores write G over
// the softmax, then the cube cores run the two backward GEMMs over all of K, each output
// tile written once in the input dtype. The order of everything is in
// op_kernel/…_schedule.h. No [BT, V] buffer in memory-saving mode; no accumulator in
// high-performance mode. Deterministic in both modes, for any core count: no result depends
// on how the work is dealt to the cores.
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
  // The loss options (SPEC §7): FlceOption bits (0: the plain op, SPEC §1), the logit
  // scale and the soft-cap (> 0 with kFlceOptSoftcap).
  uint32_t options = 0;
  float logitScale = 1.0f, softcap = 0.0f;
};

struct FusedLinearCrossEntropyLossGradTiling {
  FusedLinearCrossEntropyLossGradTilingData data;
  uint32_t blockDim;           // cube cores to launch (0 when BT = 0 or H = 0: nothing to launch)
  uint64_t tilingKey;          // mode + 2*(dtype is bf16) + 4*target64
  uint64_t sysWorkspaceBytes;  // the Matmul library's system workspace, in front of ours
  uint64_t workspaceBytes;     // system + user
  std::string error;
};

// What the kernel takes. The Matmul library copies every L1 fill GM -> L1 with one ND->NZ
// DataCopy whose source row pitch (Nd2NzParams.srcDValue) is a uint16_t on A2, [1, 65535]
// (asc-devkit include/basic_api/kernel_struct_data_copy.h:300, data_copy_wrapper_nd.h:85):
// x's and w's pitch is H, in both modes with CFG_NORM, so H <= 65535 (CANN's own FLCE
// tiling has the same limit). High-performance mode's G lies over the softmax at pitch 2V;
// its GEMMs take intrinsicsCheck (row-by-row fills past 65535, data_copy_wrapper_nd.h:105-113)
// whose row offsets gCol · i are int32 (:112): 2V times the rows of one fill (at most 1024
// here, FlceFillError checks the tilings) must stay below 2^31, so V <= 2^20 there.
// Memory-saving mode's G pitch is a window's columns (<= 2048): V is bounded by the 32-bit
// Matmul shapes only.
constexpr uint64_t kFlceMaxH = 65535;
constexpr uint64_t kFlceMaxHighPerformanceV = uint64_t(1) << 20;
constexpr uint64_t kFlceMaxFillRows = 1024;

constexpr uint32_t kFlceRowBlock = 128;  // rows of a logits task
constexpr uint32_t kFlceColBlock = 256;  // vocabulary columns of a logits task
constexpr uint32_t kFlceTileM = 128;     // output rows of a backward GEMM tile
constexpr uint32_t kFlceTileN = 256;     // output columns (of H) of a tile: tileM x tileN fp32 = L0C's 128 KiB
constexpr uint32_t kFlceGTileRows = 32;  // UB: 2 x 32 x 256 x 4 (fp32 in) + 2 x 32 x 256 x 2 (G out) = 96 KiB
constexpr uint32_t kFlceCastElems = 2048;  // fp32 elements of an accumulator tile (8 KiB)
constexpr uint32_t kFlceWindowMaxBlocks = 8;   // a window's rows and columns, in tasks, at most (CANN's 8 x 8)
constexpr uint32_t kFlceGroupRowBlocks = 8;    // tile rows per group of the tile order (…_schedule.h)
constexpr uint32_t kFlceReportBytes = 8;       // per vector core: its first bad-target row (int64)
// CANN: platform_ascendc::PlatformAscendC::GetLibApiWorkSpaceSize() (16 MiB on A2/A3).
constexpr uint64_t kFlceSysWorkspaceBytes = 16ull << 20;
constexpr uint64_t kFlceWorkspaceAlign = 512;

// One Matmul of the kernel as CANN's MultiCoreMatmulTiling is told it (the TilingFunc's
// calls, op_host/…_def.cpp): SetDim(1) (each Matmul call runs on one cube core), A and B
// in GM, ND, half or bfloat16 (B transposed for the logits, A for Gᵀ·x), C in GM (fp32, or
// the input dtype for high-performance mode's outputs), SetShape = SetOrgShape = (m, n, k),
// SetFixSplit(baseM, baseN, baseK), SetTraverse(FIRSTM), no bias, SetBufferSpace(l1Budget).
// The library fills every TCubeTiling field from this; nothing here predicts its answer.
struct FlceMatmulRequest {
  int32_t m, n, k;
  int32_t baseM, baseN, baseK;
  uint64_t l1Budget;   // bytes of L1 the object may use
  bool cInInputDtype;  // C in half / bfloat16 (high-performance outputs), else fp32
};

// Each object's L1 budget. All Matmul objects of one TPipe start at the same L1 (and L0C)
// address (asc-devkit impl/basic_api/kernel_tpipe_base.h, InitShareBufStart /
// AuxShareBufStart), so the budgets do not add up: each object uses the shared space in
// turn, and the kernel calls End() on one before the next loads (the simulator checks it).
// The TilingFunc passes min(budget, the L1 PlatformAscendC reports: 524032 bytes on A2/A3,
// 256 short of 512 KiB). These budgets keep stepM = stepN = 1 for every H (more L1 makes
// the library hold two N blocks of B per load, stepN 2, which the simulator does not model).
constexpr uint64_t kFlceLogitsL1 = 96 << 10, kFlceInputGradL1 = 128 << 10, kFlceWeightGradL1 = 128 << 10;

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

// High-performance mode's G operands (input_grad's A, row pitch 2V; weight_grad's A = Gᵀ,
// the same pitch as orgM) are copied row by row when 2V >= 65535; the library adds gCol · i
// in int32 for the i-th row of a fill (data_copy_wrapper_nd.h:112): refused when the
// tilings' fills are too tall for that ("" when they fit).
inline std::string FlceFillError(const AscendC::tiling::TCubeTiling& inputGrad,
                                 const AscendC::tiling::TCubeTiling& weightGrad, uint64_t v, uint32_t mode) {
  if (mode != kHighPerformance) return "";
  const uint64_t rows[2] = {uint64_t(inputGrad.baseM), uint64_t(weightGrad.baseK) * uint64_t(weightGrad.stepKa)};
  for (uint64_t r : rows)
    if (r > kFlceMaxFillRows || 2 * v * (r - 1) > 0x7FFFFFFFull)
      return "a G fill of " + std::to_string(r) + " rows at pitch 2V = " + std::to_string(2 * v) +
             " passes the Matmul copy's 32-bit row offsets";
  return "";
}

// The three requests for the tiling `d` (its H, mode and the backward GEMMs' K: a window's
// vocabulary columns and rows in memory-saving mode, all of V and BT in high-performance
// mode; shorter windows and tiles use part of them through SetSingleShape). A fixed baseN
// is the only N factor the library tries, and it gives up (GetTiling -1) when baseN
// exceeds N rounded up to the 16-row fractal (matmul_tiling_algorithm.cpp, :403-404 /
// :436-437), so baseN is clamped to RoundUp(h, 16); M is the block's own size, which the
// fixed baseM covers exactly. The fixed baseK is a hint the library does not impose (it
// lowers it for a small K, and may raise it).
inline void FlceMatmulRequests(const FusedLinearCrossEntropyLossGradTilingData& d, FlceMatmulRequest (&out)[3]) {
  const int32_t h = static_cast<int32_t>(Max(d.h, 1));
  const int32_t hBlock = static_cast<int32_t>(RoundUpTo(uint64_t(h), 16));
  const int32_t n = static_cast<int32_t>(Min(kFlceTileN, h));            // a tile's columns of H
  const int32_t baseN = static_cast<int32_t>(Min(kFlceTileN, hBlock));  // in whole fractals
  const bool hp = d.mode == 1;
  const int32_t kInput = static_cast<int32_t>(hp ? d.v : Min(uint64_t(d.windowColBlocks) * d.colBlock, d.v));
  const int32_t kWeight = static_cast<int32_t>(hp ? Max(d.bt, 1) : Min(uint64_t(d.windowRowBlocks) * d.rowBlock, Max(d.bt, 1)));
  out[0] = FlceMatmulRequest{static_cast<int32_t>(d.rowBlock), static_cast<int32_t>(d.colBlock), h,
                             128, 256, 64, kFlceLogitsL1, false};                                // x_b · w_bᵀ
  out[1] = FlceMatmulRequest{static_cast<int32_t>(d.tileM), n, kInput, 128, baseN, 64, kFlceInputGradL1, hp};    // G · w
  out[2] = FlceMatmulRequest{static_cast<int32_t>(d.tileM), n, kWeight, 128, baseN, 64, kFlceWeightGradL1, hp};  // Gᵀ · x
}

// The window (in tasks: rows of kFlceRowBlock, columns of kFlceColBlock) whose working set
// stays in half the L2 while the windows of a window row go by: its x rows and fp32
// input_grad accumulator rows (what the window row keeps), its w rows and fp32 weight_grad
// accumulator rows (what each window brings in), and the two window G buffers; the other
// half is for what streams through. The most tasks per window, then the most rows (each
// window streams its w and weight_grad rows in: fewer windows along BT, fewer passes).
// Worked example, H = 4096, bf16, 192 MiB of L2: a task row costs 128 x 4096 x (2 + 4) =
// 3 MiB, a task column 256 x 4096 x 6 = 6 MiB, a task's G 2 x 64 KiB: 8 x 8 tasks take
// 24 + 48 + 8 = 80 MiB of the 96. H = 8192 (6 and 12 MiB): 7 x 4; H = 5120: 8 x 7
// (tests/test_ascendc_tiling.py).
// The two G buffers also stay within the per-core partials CANN's own kernel keeps in its
// workspace on this chip, 2 x cores x (128 + 256) x H fp32 (ops-nn v9.0.0
// op_host/fused_linear_cross_entropy_loss_grad_tiling.cpp:561-569), so the whole workspace
// is never larger than CANN's at the same shape: that binds only below H of about 114 on
// 24 cores (1 x 1 windows at H = 1), where a window's G outweighs CANN's partials.
inline void FlceWindowBlocks(uint64_t h, uint64_t elemBytes, uint64_t l2Bytes, uint64_t aiCores, uint64_t rowBlocks,
                             uint64_t colBlocks, uint32_t& windowRowBlocks, uint32_t& windowColBlocks) {
  const uint64_t budget = l2Bytes / 2;
  const uint64_t perRow = uint64_t(kFlceRowBlock) * h * (elemBytes + 4);
  const uint64_t perCol = uint64_t(kFlceColBlock) * h * (elemBytes + 4);
  const uint64_t perTask = 2 * uint64_t(kFlceRowBlock) * kFlceColBlock * elemBytes;  // two G buffers
  // Less the report and the accumulators' rounding, each within one kFlceWorkspaceAlign.
  const uint64_t cannPartials = 2 * aiCores * uint64_t(kFlceRowBlock + kFlceColBlock) * h * 4 - 2 * kFlceWorkspaceAlign;
  uint64_t best = 0;
  windowRowBlocks = windowColBlocks = 1;
  for (uint64_t r = 1; r <= Min(kFlceWindowMaxBlocks, rowBlocks); ++r)
    for (uint64_t c = 1; c <= Min(kFlceWindowMaxBlocks, colBlocks); ++c) {
      if (r * perRow + c * perCol + r * c * perTask > budget) continue;
      if (r * c > 1 && r * c * perTask > cannPartials) continue;
      if (r * c > best || (r * c == best && r > windowRowBlocks)) {
        best = r * c;
        windowRowBlocks = static_cast<uint32_t>(r);
        windowColBlocks = static_cast<uint32_t>(c);
      }
    }
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
  if (shape.options != 0) {
    if ((shape.options & kFlceOptCoefficients) == 0) {
      t.error = "the options need the per-row coefficients alpha, beta and gamma";
      return t;
    }
    if ((shape.options & kFlceOptSoftcap) != 0 && !(shape.softcap > 0.0f && shape.softcap < 3.0e38f)) {
      t.error = "softcap must be a finite cap > 0";
      return t;
    }
    if (!(shape.logitScale > -3.0e38f && shape.logitScale < 3.0e38f)) { t.error = "logit_scale must be finite"; return t; }
    // High-performance mode takes the softmax as given: its soft-cap derivative would need
    // the logits, which only memory-saving mode recomputes; a bias has no effect there.
    if (shape.mode == kHighPerformance && (shape.options & kFlceOptSoftcap) != 0) {
      t.error = "softcap needs memory-saving mode (the logits); high-performance mode has only the softmax";
      return t;
    }
  }
  if (shape.v > (1u << 30) || shape.bt > (1u << 30)) {
    t.error = "BT (input.size(0)) and V (weight.size(0)) must each be at most 2^30 (the Matmul shapes are 32-bit), got "
              "BT = " + std::to_string(shape.bt) + ", V = " + std::to_string(shape.v);
    return t;
  }
  if (shape.h > kFlceMaxH) {
    t.error = "H (input.size(1)) = " + std::to_string(shape.h) + " is above 65535: the Matmul's GM->L1 copy takes x's "
              "and w's row pitch, H, in a 16-bit field on Atlas A2/A3 (Nd2NzParams.srcDValue)";
    return t;
  }
  if (shape.mode == kHighPerformance && shape.v > kFlceMaxHighPerformanceV) {
    t.error = "V (weight.size(0)) = " + std::to_string(shape.v) + " is above " +
              std::to_string(kFlceMaxHighPerformanceV) + " in high-performance mode (G over the softmax has row pitch "
              "2V, and the Matmul's row-by-row GM->L1 copy offsets are 32-bit): use memory-saving mode";
    return t;
  }
  FusedLinearCrossEntropyLossGradTilingData& d = t.data;
  const uint64_t e = DtypeBytes(shape.dtype);
  d.bt = shape.bt; d.h = shape.h; d.v = shape.v;
  d.rowBlock = kFlceRowBlock;
  d.colBlock = kFlceColBlock;
  d.rowBlocks = CeilDiv(shape.bt, kFlceRowBlock);
  d.colBlocks = CeilDiv(shape.v, kFlceColBlock);
  d.mode = shape.mode;
  // BT = 0 or H = 0: the outputs hold nothing to compute (weight_grad is zero or empty);
  // no launch, never one with blockDim 0.
  const bool empty = shape.bt == 0 || shape.h == 0;
  d.tileM = kFlceTileM;
  d.tileN = kFlceTileN;
  d.hTiles = CeilDiv(shape.h, kFlceTileN);
  d.groupRowBlocks = kFlceGroupRowBlocks;
  if (shape.mode == kMemorySaving) {
    FlceWindowBlocks(shape.h, e, platform.l2Bytes, platform.aiCores, Max(d.rowBlocks, 1), d.colBlocks,
                     d.windowRowBlocks, d.windowColBlocks);
    d.windowRows = CeilDiv(d.rowBlocks, d.windowRowBlocks);
    d.windowCols = CeilDiv(d.colBlocks, d.windowColBlocks);
    d.windows = d.windowRows * d.windowCols;
  }
  // Cube cores: as many as the largest step has items of one kind, at most the chip's.
  uint64_t items = 0;
  if (shape.mode == kHighPerformance) {
    items = CeilDiv(shape.bt, kFlceTileM) * d.hTiles + CeilDiv(shape.v, kFlceTileM) * d.hTiles;
  } else {  // the first window is the largest: its tasks, or its tiles of both GEMMs
    const uint64_t rows = Min(uint64_t(d.windowRowBlocks) * kFlceRowBlock, shape.bt);
    const uint64_t cols = Min(uint64_t(d.windowColBlocks) * kFlceColBlock, shape.v);
    items = Max(Min(d.windowRowBlocks, d.rowBlocks) * Min(d.windowColBlocks, d.colBlocks),
                (CeilDiv(rows, kFlceTileM) + CeilDiv(cols, kFlceTileM)) * d.hTiles);
  }
  d.cubeCores = empty ? 0 : static_cast<uint32_t>(Min(platform.aiCores, Max(items, 1)));
  d.gTileRows = kFlceGTileRows;  // the options' UB (4 fp32 rows of colBlock at most: 4 KiB) fits beside
  // High-performance mode's G pass: a softmax row chunk in fp32 and its G, each double-
  // buffered (12 bytes a column for bf16/half), in what UB has left after 1 KiB for the
  // report and alignment; whole 256-byte repeats.
  // With class weights, a chunk of them and of their term (fp32) beside it.
  const uint64_t weightBytes = (shape.options & kFlceOptClassWeight) != 0 ? 8 : 0;
  const uint64_t chunk = (platform.ubBytes - 1024) / (2 * 4 + 2 * e + weightBytes) / 64 * 64;
  d.chunkCols = static_cast<uint32_t>(Min(chunk, RoundUpTo(shape.v, 16)));
  d.castCols = static_cast<uint32_t>(Max(1, Min(shape.h, kFlceCastElems)));
  d.castRows = static_cast<uint32_t>(Max(1, kFlceCastElems / RoundUpTo(d.castCols, 16)));
  uint64_t offset = 0;
  if (shape.mode == kMemorySaving) {
    d.logitsSlotBytes = uint64_t(kFlceRowBlock) * kFlceColBlock * 4;
    d.ringBytes = RoundUpTo(2 * d.logitsSlotBytes, kFlceWorkspaceAlign);
    d.gOffset = uint64_t(d.cubeCores) * d.ringBytes;
    d.gWindowBytes = RoundUpTo(uint64_t(d.windowRowBlocks) * kFlceRowBlock * d.windowColBlocks * kFlceColBlock * e,
                               kFlceWorkspaceAlign);
    d.accOffset = d.gOffset + 2 * d.gWindowBytes;
    offset = d.accOffset + RoundUpTo((shape.bt + shape.v) * shape.h * 4, kFlceWorkspaceAlign);
  }
  d.reportOffset = offset;
  d.userWorkspaceBytes = offset + RoundUpTo(2ull * d.cubeCores * kFlceReportBytes, kFlceWorkspaceAlign);
  // The three Matmul tilings (logitsMm, inputGradMm, weightGradMm) are left zero: the
  // TilingFunc fills them from CANN's MultiCoreMatmulTiling (FlceMatmulRequests) and
  // checks them with FlceCubeBufferError; the simulator runs the tiling data it produced.
  t.blockDim = d.cubeCores;
  // The scale bit follows the value: a scale of 1 costs the kernel nothing.
  d.options = shape.options == 0 ? 0
                                 : (shape.options & ~uint32_t(kFlceOptScale)) | (shape.logitScale != 1.0f ? kFlceOptScale : 0u);
  d.logitScale = shape.options != 0 ? shape.logitScale : 1.0f;
  d.softcap = (shape.options & kFlceOptSoftcap) != 0 ? shape.softcap : 0.0f;
  t.tilingKey = shape.mode + 2 * (shape.dtype == kBFloat16) + 4 * shape.target64 + 8 * (shape.options != 0);
  t.sysWorkspaceBytes = empty ? 0 : kFlceSysWorkspaceBytes;
  t.workspaceBytes = empty ? 0 : t.sysWorkspaceBytes + d.userWorkspaceBytes;
  return t;
}

}  // namespace ascend_ops_kernels
