// A small MIX kernel that uses REGIST_MATMUL_OBJ the KFC way (lib/matmul_intf.h without
// ASCENDC_CUBE_ONLY): the AIC becomes a server and the AIVs issue the Matmul calls. With
// no bug it computes what selftest_mix_kernel.cpp does (per AI core y = 2 · A · Bᵀ): each
// AIV has its half of C's rows computed by the server, then scales them by 2. The bugs
// (on the last AI core only) are the ways KFC is misused:
//   kAicDrivesTheCube: REGIST_MATMUL_OBJ and the Matmul calls on the AIC only, the AIVs
//     waiting for its flag (the shape the FLCE kernel once had): the AIC serves clients
//     that never come, the AIVs wait for a flag never set: a hang;
//   kNotSystemWorkspace: REGIST_MATMUL_OBJ given the user workspace instead of the system one.
#include <cstdio>
#include <string>

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

using namespace AscendC;

namespace {

enum KfcBug : int32_t { kNone = 0, kAicDrivesTheCube, kNotSystemWorkspace };

constexpr int32_t kN = 32;  // M = N = K
constexpr int32_t kRows = kN / 2, kCount = kRows * kN;

using AType = MatmulType<TPosition::GM, CubeFormat::ND, half>;
using BType = MatmulType<TPosition::GM, CubeFormat::ND, half, true>;
using CType = MatmulType<TPosition::GM, CubeFormat::ND, float>;

TCubeTiling Tiling() {
  TCubeTiling t;
  t.usedCoreNum = 1;
  t.M = t.N = t.Ka = t.Kb = kN;
  t.singleCoreM = t.singleCoreN = t.singleCoreK = kN;
  t.baseM = t.baseN = t.baseK = kN;
  t.depthA1 = t.depthB1 = 1;
  t.stepM = t.stepN = t.stepKa = t.stepKb = 1;
  t.dbL0A = t.dbL0B = t.dbL0C = 1;
  t.shareL1Size = (t.baseM + t.baseN) * t.baseK * 2;
  t.shareL0CSize = t.baseM * t.baseN * 4;
  return t;
}

// The FLCE kernel's old shape: the cube side registers and calls Matmul itself.
void AicAlone(GM_ADDR a, GM_ADDR b, GM_ADDR user) {
  TPipe pipe;
  TCubeTiling tiling = Tiling();
  Matmul<AType, BType, CType> mm;
  REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);  // a KFC server: returns from AicAlone when done
  GlobalTensor<half> aGm, bGm;
  GlobalTensor<float> cGm;
  aGm.SetGlobalBuffer((__gm__ half*)a, kN * kN);
  bGm.SetGlobalBuffer((__gm__ half*)b, kN * kN);
  cGm.SetGlobalBuffer((__gm__ float*)user + GetBlockIdx() * kN * kN, kN * kN);
  mm.SetOrgShape(kN, kN, kN);
  mm.SetSingleShape(kN, kN, kN);
  mm.SetTensorA(aGm);
  mm.SetTensorB(bGm, true);
  mm.IterateAll(cGm);
  mm.End();
  CrossCoreSetFlag<2, PIPE_FIX>(0);
}

// Both kinds of core call this; the AIC serves inside REGIST_MATMUL_OBJ and returns.
void Kfc(GM_ADDR a, GM_ADDR b, GM_ADDR user, GM_ADDR y, GM_ADDR workspace, int32_t bug) {
  TPipe pipe;
  TCubeTiling tiling = Tiling();
  Matmul<AType, BType, CType> mm;
  REGIST_MATMUL_OBJ(&pipe, bug == kNotSystemWorkspace ? user : GetSysWorkSpacePtr(), mm, &tiling);
  // Only the AIVs get here: their half of C's rows, computed by their AIC.
  const uint64_t offset = uint64_t(GetBlockIdx() / GetTaskRatio()) * kN * kN + GetSubBlockIdx() * kCount;
  GlobalTensor<half> aGm, bGm;
  GlobalTensor<float> cGm, yGm;
  aGm.SetGlobalBuffer((__gm__ half*)a, kN * kN);
  bGm.SetGlobalBuffer((__gm__ half*)b, kN * kN);
  cGm.SetGlobalBuffer((__gm__ float*)user + offset, kCount);
  yGm.SetGlobalBuffer((__gm__ float*)y + offset, kCount);
  mm.SetOrgShape(kN, kN, kN);
  mm.SetSingleShape(kRows, kN, kN);
  mm.SetTensorA(aGm[GetSubBlockIdx() * kCount]);
  mm.SetTensorB(bGm, true);
  mm.IterateAll(cGm);
  mm.End();
  TQue<QuePosition::VECIN, 1> inQue;
  TQue<QuePosition::VECOUT, 1> outQue;
  pipe.InitBuffer(inQue, 1, kCount * sizeof(float));
  pipe.InitBuffer(outQue, 1, kCount * sizeof(float));
  LocalTensor<float> in = inQue.AllocTensor<float>();
  DataCopy(in, cGm, kCount);
  inQue.EnQue(in);
  in = inQue.DeQue<float>();
  LocalTensor<float> out = outQue.AllocTensor<float>();
  Muls(out, in, 2.0f, kCount);
  outQue.EnQue(out);
  inQue.FreeTensor(in);
  out = outQue.DeQue<float>();
  DataCopy(yGm, out, kCount);
  outQue.FreeTensor(out);
}

}  // namespace

extern "C" __global__ __aicore__ void selftest_kfc(GM_ADDR a, GM_ADDR b, GM_ADDR y, GM_ADDR workspace, GM_ADDR bugArg) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
  const int32_t requested = *reinterpret_cast<int32_t*>(bugArg);
  const int32_t bug = GetBlockIdx() / GetTaskRatio() == GetBlockNum() - 1 ? requested : kNone;
  GM_ADDR user = GetUserWorkspace(workspace);
  if (bug == kAicDrivesTheCube) {
    if ASCEND_IS_AIC {
      AicAlone(a, b, user);
    }
    if ASCEND_IS_AIV {
      CrossCoreWaitFlag(0);
    }
    return;
  }
  Kfc(a, b, user, y, workspace, bug);
}

// selftest_mix_kernel.cpp: sizes `workspace` and sets the next launch over a, b, y and it.
void SetMixSelftestLaunch(std::string& workspace, uint32_t blocks, const void* a, const void* b, float* y,
                          sim::LaunchKind kind, uint64_t sys_bytes, bool check_determinism);

// Launched by asim_run_selftest_mix (selftest_mix_kernel.cpp) for bug numbers from 100.
int RunSelftestKfc(int32_t bug, uint32_t blocks, const void* a, const void* b, float* y, char* error,
                   uint64_t error_bytes) {
  int32_t bug_value = bug;
  std::string workspace;
  SetMixSelftestLaunch(workspace, blocks, a, b, y, sim::LaunchKind::MixAic1To2, sim::kReservedWorkspace, false);
  auto* ws = reinterpret_cast<uint8_t*>(&workspace[0]);
  try {
    ICPU_RUN_KF(selftest_kfc, blocks, (GM_ADDR)a, (GM_ADDR)b, (GM_ADDR)y, (GM_ADDR)ws, (GM_ADDR)&bug_value);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_bytes, "%s", e.what());
    return 1;
  }
}
