// A small MIX kernel (AIC:AIV = 1:2) that can be told to break one rule of the cube-core
// and cross-core parts of the simulator, on the last AI core only. With no bug: the AIC
// of each AI core computes C = A · Bᵀ (32 x 32 x 32, half in, fp32 out) with the Matmul
// API into its part of the user workspace and flags its AIVs; each AIV scales half of
// C's rows by 2 into y; at the end all AIVs, then all AICs, meet with mode-0 flags. The
// cube is driven from the AIC (ASCENDC_CUBE_ONLY, as the FLCE kernel does); the KFC form
// of REGIST_MATMUL_OBJ has its own kernel, selftest_kfc_kernel.cpp. The strictness tests
// (tests/test_ascendc_sim.py) run each bug.
#include <cstdio>
#include <string>

#define ASCENDC_CUBE_ONLY  // REGIST_MATMUL_OBJ initialises the objects on the AIC: no KFC server
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

using namespace AscendC;

namespace {

enum MixBug : int32_t {
  kNone = 0,
  kMatmulOnVector,       // Matmul::Init on an AIV
  kL0aOverflow,          // baseM 256 x baseK 128 half x 2 buffers = 128 KiB > 64 KiB
  kL0bOverflow,          // baseN 256 x baseK 128 half x 2 buffers
  kL0cOverflow,          // baseM 256 x baseN 256 fp32 = 256 KiB > 128 KiB
  kL1Overflow,           // depthA1 = stepKa = 64 blocks of 32 x 256 half = 1 MiB
  kFractalRows,          // baseM 24: not a multiple of the 16-row fractal
  kFractalK,             // baseK 8 half = 16 bytes: not a multiple of 32 bytes
  kTransposeUndeclared,  // SetTensorA(gm, true) with ISTRANS false in A's MatmulType
  kSingleBeyondTiling,   // SetSingleShape(64, ...) with singleCoreM 32
  kIterateWithoutB,      // Iterate before SetTensorB
  kSetOnScalarPipe,      // CrossCoreSetFlag<2, PIPE_S>: Atlas 350 only
  kRegistAfterInitBuffer,
  kFiveMatmuls,          // more than the documented 4 Matmul objects
  kCOutOfBounds,         // C GlobalTensor too small for the block
  kWaitNeverSet,         // an AIV waits for a flag the AIC never sets: the device hangs
  kOneAivSets,           // mode 2: only AIV 0 sets, the AIC waits for both: hangs
  kFlagLeftSet,          // the AIC sets a flag nobody waits for
  kFlagIdRange,          // flag id 11 (A2/A3: 0..10)
  kWritesSysWorkspace,   // kernel data in `workspace` instead of GetUserWorkspace(workspace)
  kSyncAllOnCube,        // SyncAll<true> on the AIC
  kTypeMismatch,         // declared MIX 1:2, launched on vector cores only (host side)
  kMode1OnCube,          // CrossCoreSetFlag mode 1 (AIV <-> AIV) called on the AIC
  kReadBeforeWait,       // an AIV copies C in before waiting for the AIC's flag: a data race
  kUseBeforeRegist,      // SetOrgShape on a Matmul object never registered
  kOperandBeyondTensor,  // A's GlobalTensor holds 16 of the 32 rows the shape reads
  kGetCWithoutIterate,   // GetTensorC before any Iterate
  kCubeWaitUnpaired,     // WaitFlag<HardEvent::FIX_M> on the AIC with no SetFlag before it
  kAivSyncAll,           // every AIV calls SyncAll at the end: fine up to 24 AI cores (48 AIVs), a hang beyond
  kCounterOverflow,      // the AIC sets flag 5 sixteen times before its AIVs wait: the counter holds 15
  kCounterFull,          // the same with fifteen sets: allowed
  kMode0Skipped,         // the last AI core's AIVs skip the mode-0 meeting: every other AIV waits forever
  kFlagOnWrongPipe,      // the AIC flags C on PIPE_MTE2, which its fixpipe's stores are not ordered before
  kTilingWithoutL1Size,  // shareL1Size 0: what a hand-filled TCubeTiling leaves unset
  kSetOnVectorPipeOnCube,  // CrossCoreSetFlag<2, PIPE_V> on the AIC: not a cube pipe
  kTilingWithoutL0CSize,   // shareL0CSize 0
  kTilingStepKMismatch,    // stepKa 2, stepKb 3: neither a multiple of the other
  kTilingDepthNotFills,    // depthA1 3 with stepM x stepKa = 1: not 1 or 2 L1 fills
  kTilingBatchField,       // batchM 2: a batch Matmul's tiling on a plain Matmul
  kSecondMatmulBeforeEnd,  // a second Matmul object on the TPipe runs before the first's End(): they share L1/L0C
  kSecondMatmulAfterEnd,   // the same with End() in between: allowed
  kSysWorkspaceShort,      // the host reserves 4 KiB of system workspace, not RESERVED_WORKSPACE (host side)
  kUserWorkspaceOffset,    // GetUserWorkspace(workspace + 64): the device ignores the argument, CPU debug does not
  kAtomicAddsUnordered,    // every AIC atomically adds a product of its own into one shared block, nothing
                           // ordering the adds: the rounded sum depends on their order (rule F)
};

constexpr int32_t kN = 32;  // M = N = K

using AType = MatmulType<TPosition::GM, CubeFormat::ND, half>;
using ATransType = MatmulType<TPosition::GM, CubeFormat::ND, half, true>;
using CType = MatmulType<TPosition::GM, CubeFormat::ND, float>;

TCubeTiling Tiling(int32_t bug) {
  TCubeTiling t;  // every field 0, as CANN's struct starts
  t.usedCoreNum = 1;
  t.M = t.N = t.Ka = t.Kb = kN;
  t.singleCoreM = t.singleCoreN = t.singleCoreK = kN;
  t.baseM = t.baseN = t.baseK = kN;
  t.depthA1 = t.depthB1 = 1;
  t.stepM = t.stepN = t.stepKa = t.stepKb = 1;
  t.dbL0A = t.dbL0B = t.dbL0C = 1;
  if (bug == kL0aOverflow) { t.baseM = 256; t.baseK = 128; t.dbL0A = 2; }
  if (bug == kL0bOverflow) { t.baseN = 256; t.baseK = 128; t.dbL0B = 2; }
  if (bug == kL0cOverflow) { t.baseM = 256; t.baseN = 256; }
  if (bug == kL1Overflow) { t.baseK = 256; t.stepKa = t.depthA1 = 64; }
  if (bug == kFractalRows) t.baseM = 24;
  if (bug == kFractalK) t.baseK = 8;
  // What GetTiling reports as used: the L1 depths and the L0C block.
  t.shareL1Size = (t.depthA1 * t.baseM + t.depthB1 * t.baseN) * t.baseK * 2;
  t.shareL0CSize = t.baseM * t.baseN * 4 * t.dbL0C;
  if (bug == kTilingWithoutL1Size) t.shareL1Size = 0;
  if (bug == kTilingWithoutL0CSize) t.shareL0CSize = 0;
  if (bug == kTilingStepKMismatch) { t.stepKa = t.depthA1 = 2; t.stepKb = t.depthB1 = 3; }
  if (bug == kTilingDepthNotFills) t.depthA1 = 3;
  if (bug == kTilingBatchField) t.batchM = 2;
  return t;
}

// `meet`: end with the mode-0 meeting of all cores of a kind (runs that hang or fail on
// purpose skip it, so the report comes from the core the test names).
void Cube(GM_ADDR a, GM_ADDR b, GM_ADDR user, GM_ADDR y, GM_ADDR workspace, int32_t bug, int32_t requested, bool meet) {
  TPipe pipe;
  TCubeTiling tiling = Tiling(bug);
  GlobalTensor<half> aGm, bGm;
  GlobalTensor<float> cGm;
  aGm.SetGlobalBuffer((__gm__ half*)a, bug == kOperandBeyondTensor ? kN * kN / 2 : kN * kN);
  bGm.SetGlobalBuffer((__gm__ half*)b, kN * kN);
  GM_ADDR c = bug == kWritesSysWorkspace ? workspace : user + GetBlockIdx() * kN * kN * sizeof(float);
  cGm.SetGlobalBuffer((__gm__ float*)c, bug == kCOutOfBounds ? kN * kN / 2 : kN * kN);
  if (bug == kRegistAfterInitBuffer) {
    TQue<QuePosition::VECIN, 1> que;
    pipe.InitBuffer(que, 1, 512);
  }
  if (bug == kFiveMatmuls) {
    Matmul<AType, ATransType, CType> m0, m1, m2, m3, m4;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), m0, &tiling, m1, &tiling, m2, &tiling, m3, &tiling, m4, &tiling);
  }
  if (bug == kTransposeUndeclared) {
    Matmul<AType, ATransType, CType> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    mm.SetTensorA(aGm, true);
  }
  if (bug == kUseBeforeRegist) {
    Matmul<AType, ATransType, CType> unregistered;
    unregistered.SetOrgShape(kN, kN, kN);
  }
  Matmul<AType, ATransType, CType> mm, second;
  const bool twoObjects = bug == kSecondMatmulBeforeEnd || bug == kSecondMatmulAfterEnd;
  if (twoObjects) {
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling, second, &tiling);
  } else {
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
  }
  mm.SetOrgShape(kN, kN, kN);
  mm.SetSingleShape(bug == kSingleBeyondTiling ? 2 * kN : kN, kN, kN);
  mm.SetTensorA(aGm);
  if (bug != kIterateWithoutB) mm.SetTensorB(bGm, true);
  if (bug == kGetCWithoutIterate) mm.GetTensorC(cGm);
  if (GetBlockIdx() % 2 == 1) {
    mm.IterateAll(cGm);
  } else {
    while (mm.Iterate()) mm.GetTensorC(cGm);
  }
  if (twoObjects) {  // the second object computes the same C again, after (or before) the first's End()
    if (bug == kSecondMatmulAfterEnd) mm.End();
    second.SetOrgShape(kN, kN, kN);
    second.SetSingleShape(kN, kN, kN);
    second.SetTensorA(aGm);
    second.SetTensorB(bGm, true);
    second.IterateAll(cGm);
    second.End();
  }
  mm.End();
  if (requested == kAtomicAddsUnordered) {  // K shortened per core: every core adds other values
    GlobalTensor<float> shared;
    shared.SetGlobalBuffer((__gm__ float*)y + GetBlockNum() * kN * kN, kN * kN);
    mm.SetSingleShape(kN, kN, kN - 2 * static_cast<int32_t>(GetBlockIdx()));
    mm.IterateAll(shared, 1);
    mm.End();
  }
  // The cube core's pipes pair flags like the vector core's (IDs from the pipe).
  const TEventID mToFix = pipe.FetchEventID(HardEvent::M_FIX);
  SetFlag<HardEvent::M_FIX>(mToFix);
  WaitFlag<HardEvent::M_FIX>(mToFix);
  if (bug == kCubeWaitUnpaired) WaitFlag<HardEvent::FIX_M>(pipe.FetchEventID(HardEvent::FIX_M));
  if (bug == kSyncAllOnCube) SyncAll();
  if (bug == kFlagOnWrongPipe) {
    CrossCoreSetFlag<2, PIPE_MTE2>(0);  // MTE2 finished loading A and B; the fixpipe may still be storing C
  } else {
    CrossCoreSetFlag<2, PIPE_FIX>(bug == kFlagIdRange ? 11 : 0);
  }
  if (bug == kFlagLeftSet) CrossCoreSetFlag<2, PIPE_FIX>(3);
  if (bug == kOneAivSets) CrossCoreWaitFlag(1);
  if (bug == kMode1OnCube) CrossCoreSetFlag<1, PIPE_FIX>(4);
  if (bug == kSetOnScalarPipe) CrossCoreSetFlag<2, PIPE_S>(6);
  if (bug == kSetOnVectorPipeOnCube) CrossCoreSetFlag<2, PIPE_V>(6);
  if (bug == kCounterOverflow || bug == kCounterFull) {
    for (int i = 0; i < (bug == kCounterOverflow ? 16 : 15); ++i) CrossCoreSetFlag<2, PIPE_FIX>(5);
    CrossCoreSetFlag<2, PIPE_FIX>(6);  // the AIVs wait for this one first: all sets are pending
  }
  if (meet) {  // every AIC of the launch meets the others (mode 0)
    CrossCoreSetFlag<0, PIPE_FIX>(8);
    CrossCoreWaitFlag(8);
  }
}

void Vector(GM_ADDR user, GM_ADDR y, int32_t bug, bool meet) {
  TPipe pipe;
  TQue<QuePosition::VECIN, 1> inQue;
  TQue<QuePosition::VECOUT, 1> outQue;
  constexpr int32_t kRows = kN / 2, kCount = kRows * kN;
  pipe.InitBuffer(inQue, 1, kCount * sizeof(float));
  pipe.InitBuffer(outQue, 1, kCount * sizeof(float));
  const uint64_t offset = uint64_t(GetBlockIdx() / GetTaskRatio()) * kN * kN + GetSubBlockIdx() * kCount;
  GlobalTensor<float> cGm, yGm;
  cGm.SetGlobalBuffer((__gm__ float*)user + offset, kCount);
  yGm.SetGlobalBuffer((__gm__ float*)y + offset, kCount);
  if (bug != kReadBeforeWait) CrossCoreWaitFlag(bug == kWaitNeverSet ? 2 : 0);
  if (bug == kOneAivSets && GetSubBlockIdx() == 0) CrossCoreSetFlag<2, PIPE_MTE3>(1);
  LocalTensor<float> in = inQue.AllocTensor<float>();
  DataCopy(in, cGm, kCount);
  if (bug == kReadBeforeWait) CrossCoreWaitFlag(0);
  inQue.EnQue(in);
  in = inQue.DeQue<float>();
  LocalTensor<float> out = outQue.AllocTensor<float>();
  Muls(out, in, 2.0f, kCount);
  outQue.EnQue(out);
  inQue.FreeTensor(in);
  out = outQue.DeQue<float>();
  DataCopy(yGm, out, kCount);
  outQue.FreeTensor(out);
  CrossCoreSetFlag<1, PIPE_MTE3>(4);  // both AIVs of the AI core: a pairwise barrier
  CrossCoreWaitFlag(4);
  if (bug == kCounterOverflow || bug == kCounterFull) {
    CrossCoreWaitFlag(6);
    for (int i = 0; i < (bug == kCounterOverflow ? 16 : 15); ++i) CrossCoreWaitFlag(5);
  }
  if (meet && bug != kMode0Skipped) {  // every AIV of the launch meets the others (mode 0)
    CrossCoreSetFlag<0, PIPE_MTE3>(7);
    CrossCoreWaitFlag(7);
  }
}

}  // namespace

extern "C" __global__ __aicore__ void selftest_mix(GM_ADDR a, GM_ADDR b, GM_ADDR y, GM_ADDR workspace, GM_ADDR bugArg) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
  const int32_t requested = *reinterpret_cast<int32_t*>(bugArg);
  const int32_t bug = GetBlockIdx() / GetTaskRatio() == GetBlockNum() - 1 ? requested : kNone;
  GM_ADDR user = GetUserWorkspace(bug == kUserWorkspaceOffset ? workspace + 64 : workspace);
  const bool meet = requested == kNone || requested == kMode0Skipped;
  if ASCEND_IS_AIC {
    if (bug == kMatmulOnVector) {
      CrossCoreSetFlag<2, PIPE_FIX>(0);
    } else {
      Cube(a, b, user, y, workspace, bug, requested, meet);
    }
  }
  if ASCEND_IS_AIV {
    if (bug == kMatmulOnVector && GetSubBlockIdx() == 1) {
      TPipe pipe;
      TCubeTiling tiling = Tiling(kNone);
      MatmulImpl<AType, ATransType, CType> mm;
      mm.Init(&tiling, &pipe);
    }
    Vector(user, y, bug, meet);
    if (requested == kAivSyncAll) SyncAll();  // all AIVs of the launch: 2 per AI core
  }
}

// The GM both MIX self-tests (this one and selftest_kfc_kernel.cpp) run over: a, b [32, 32]
// half, y (blocks + 1) x [32, 32] fp32 (the last block only for kAtomicAddsUnordered), then
// `workspace`, sized here: a system workspace and one [32, 32] fp32 user block per AI core
// (the system part `kSys` bytes: RESERVED_WORKSPACE, as GetUserWorkspace skips on the
// device). Sets the next launch's regions, kind and schedule; the caller keeps `workspace`
// alive through the launch.
void SetMixSelftestLaunch(std::string& workspace, uint32_t blocks, const void* a, const void* b, float* y,
                          sim::LaunchKind kind, uint64_t kSys, bool check_determinism) {
  workspace.assign(kSys + uint64_t(blocks) * kN * kN * sizeof(float), '\0');
  auto* ws = reinterpret_cast<uint8_t*>(&workspace[0]);
  sim::GmRegion sys{ws, kSys, "system workspace", sim::GmRole::SystemWorkspace};
  sim::GmRegion user{ws + kSys, workspace.size() - kSys, "user workspace", sim::GmRole::Workspace};
  const uint64_t ab = kN * kN * 2, yb = uint64_t(blocks + 1) * kN * kN * 4;
  sim::NextLaunch() = sim::LaunchArgs{0,
                                      {{reinterpret_cast<const uint8_t*>(a), ab, "a", sim::GmRole::Input},
                                       {reinterpret_cast<const uint8_t*>(b), ab, "b", sim::GmRole::Input},
                                       {reinterpret_cast<const uint8_t*>(y), yb, "y"}, sys, user},
                                      sim::Soc910B(), kind, sim::Schedule{sim::kDefaultSeed, check_determinism}};
}

// The KFC kernel of selftest_kfc_kernel.cpp: bug numbers from kKfcBugBase up.
constexpr int32_t kKfcBugBase = 100;
int RunSelftestKfc(int32_t bug, uint32_t blocks, const void* a, const void* b, float* y, char* error,
                   uint64_t error_bytes);

// a, b: [32, 32] half; y: (blocks + 1) x [32, 32] fp32 (y = 2 · A · Bᵀ per AI core, then the
// block kAtomicAddsUnordered adds into). `check_determinism`: run twice, compare y.
extern "C" int asim_run_selftest_mix(int32_t bug, uint32_t blocks, const void* a, const void* b, float* y,
                                     int32_t check_determinism, char* error, uint64_t error_bytes) {
  if (bug >= kKfcBugBase) return RunSelftestKfc(bug - kKfcBugBase, blocks, a, b, y, error, error_bytes);
  int32_t bug_value = bug;
  std::string workspace;
  SetMixSelftestLaunch(workspace, blocks, a, b, y,
                       bug == kTypeMismatch ? sim::LaunchKind::Vector : sim::LaunchKind::MixAic1To2,
                       bug == kSysWorkspaceShort ? 4096 : sim::kReservedWorkspace, check_determinism != 0);
  auto* ws = reinterpret_cast<uint8_t*>(&workspace[0]);
  try {
    ICPU_RUN_KF(selftest_mix, blocks, (GM_ADDR)a, (GM_ADDR)b, (GM_ADDR)y, (GM_ADDR)ws, (GM_ADDR)&bug_value);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_bytes, "%s", e.what());
    return 1;
  }
}
