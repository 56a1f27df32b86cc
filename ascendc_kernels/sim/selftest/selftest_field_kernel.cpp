// Probes of the A2 field widths the simulator checks: one kernel, one probe per field, each
// passing a value the device would truncate without a word (tests/test_ascendc_sim.py).
//
// Matmul probes (on the AIC of one AI core): C [16, 16] fp32 = A [16, 32] · B [32, 16], half,
// with the operand under test stored at a row pitch of kPitch = 65552 elements (past the
// ND->NZ copy's 16-bit srcDValue; truncated, 65552 is 16) and the other one compact:
//   probe 1: A at pitch 65552                (srcDValue = orgKa)
//   probe 2: A transposed, stored [32, 65552] (srcDValue = orgM)
//   probe 3: B at pitch 65552                 (srcDValue = orgN; C's row pitch is orgN too)
//   probe 4: B transposed, stored [16, 65552] (srcDValue = orgKb)
// with CFG_NORM; probe + 10 is the same with GetNormalConfig(true) (intrinsicsCheck: the
// library copies such fills row by row), which runs and must give the right C.
//   probe 5: SetOrgShape with an org M of 2^31 (CANN's parameter is int).
// DataCopy probes (on AIV 0), values the A2 structs cannot hold:
//   probe 21: DataCopyExtParams blockCount 65537 (uint16_t)
//   probe 22: DataCopyExtParams blockLen 2^32 + 64 (uint32_t)
//   probe 23: DataCopyExtParams srcStride 2^32 (uint32_t)
//   probe 24: DataCopyExtParams dstStride 2^32 (uint32_t)
//   probe 25: DataCopy of 2^20 half elements: 65536 blocks of 32 bytes, past
//             DataCopyParams.blockLen's 16 bits.
#include <cstdio>
#include <string>

#define ASCENDC_CUBE_ONLY
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

using namespace AscendC;

namespace {

constexpr int32_t kM = 16, kN = 16, kK = 32;
constexpr int64_t kPitch = 65552;
constexpr MatmulConfig kRowByRowCfg = GetNormalConfig(true);

using HalfType = MatmulType<TPosition::GM, CubeFormat::ND, half, true>;
using FloatType = MatmulType<TPosition::GM, CubeFormat::ND, float>;

TCubeTiling ProbeTiling() {
  TCubeTiling t;
  t.usedCoreNum = 1;
  t.M = kM; t.N = kN; t.Ka = t.Kb = kK;
  t.singleCoreM = kM; t.singleCoreN = kN; t.singleCoreK = kK;
  t.baseM = kM; t.baseN = kN; t.baseK = kK;
  t.depthA1 = t.depthB1 = 1;
  t.stepM = t.stepN = t.stepKa = t.stepKb = 1;
  t.dbL0A = t.dbL0B = t.dbL0C = 1;
  t.shareL1Size = (kM + kN) * kK * 2;
  t.shareL0CSize = kM * kN * 4;
  return t;
}

template <typename MM>
void MatmulProbe(MM& mm, TPipe& pipe, GM_ADDR a, GM_ADDR b, GM_ADDR y, int32_t operand) {
  TCubeTiling tiling = ProbeTiling();
  mm.Init(&tiling, &pipe);
  const bool aLong = operand == 1 || operand == 2, bLong = operand == 3 || operand == 4;
  const bool aTrans = operand == 2, bTrans = operand != 3;  // B compact is stored [N, K]
  GlobalTensor<half> aGm, bGm;
  GlobalTensor<float> cGm;
  // The elements each operand spans: (rows - 1) · pitch + row length.
  const uint64_t aRows = aTrans ? kK : kM, aCols = aTrans ? kM : kK;
  const uint64_t bRows = bTrans ? kN : kK, bCols = bTrans ? kK : kN;
  aGm.SetGlobalBuffer((__gm__ half*)a, (aRows - 1) * (aLong ? kPitch : aCols) + aCols);
  bGm.SetGlobalBuffer((__gm__ half*)b, (bRows - 1) * (bLong ? kPitch : bCols) + bCols);
  cGm.SetGlobalBuffer((__gm__ float*)y, operand == 3 ? (kM - 1) * kPitch + kN : kM * kN);
  // org shape: M, N, Ka, Kb; a transposed A's pitch is orgM, a transposed B's orgKb.
  const int64_t orgM = operand == 2 ? kPitch : kM, orgN = operand == 3 ? kPitch : kN;
  const int64_t orgKa = operand == 1 ? kPitch : kK, orgKb = operand == 4 ? kPitch : kK;
  if (operand == 5) {
    mm.SetOrgShape(int64_t(1) << 31, kN, kK, kK);
    return;
  }
  mm.SetOrgShape(orgM, orgN, orgKa, orgKb);
  mm.SetSingleShape(kM, kN, kK);
  mm.SetTensorA(aGm, aTrans);
  mm.SetTensorB(bGm, bTrans);
  mm.IterateAll(cGm);
  mm.End();
}

void VectorProbe(GM_ADDR a, int32_t probe) {
  TPipe pipe;
  TQue<QuePosition::VECIN, 1> que;
  pipe.InitBuffer(que, 1, 1024);
  GlobalTensor<half> aGm;
  aGm.SetGlobalBuffer((__gm__ half*)a, 512);
  LocalTensor<half> x = que.AllocTensor<half>();
  DataCopyPadExtParams<half> pad(false, 0, 0, half(0.0f));
  const uint64_t big = uint64_t(1) << 32;
  if (probe == 21) DataCopyPad(x, aGm, DataCopyExtParams(65537, 64, 0, 0, 0), pad);
  if (probe == 22) DataCopyPad(x, aGm, DataCopyExtParams(1, big + 64, 0, 0, 0), pad);
  if (probe == 23) DataCopyPad(x, aGm, DataCopyExtParams(2, 64, big, 0, 0), pad);
  if (probe == 24) DataCopyPad(x, aGm, DataCopyExtParams(2, 64, 0, big, 0), pad);
  if (probe == 25) DataCopy(x, aGm, uint64_t(1) << 20);
  que.FreeTensor(x);
}

}  // namespace

extern "C" __global__ __aicore__ void selftest_fields(GM_ADDR a, GM_ADDR b, GM_ADDR y, GM_ADDR workspace,
                                                      GM_ADDR probeArg) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
  (void)workspace;
  const int32_t probe = *reinterpret_cast<int32_t*>(probeArg);
  if ASCEND_IS_AIC {
    if (probe >= 1 && probe <= 5) {
      TPipe pipe;
      MatmulImpl<HalfType, HalfType, FloatType> mm;
      MatmulProbe(mm, pipe, a, b, y, probe);
    } else if (probe >= 11 && probe <= 14) {
      TPipe pipe;
      MatmulImpl<HalfType, HalfType, FloatType, FloatType, kRowByRowCfg> mm;
      MatmulProbe(mm, pipe, a, b, y, probe - 10);
    }
  }
  if ASCEND_IS_AIV {
    if (probe >= 21 && GetSubBlockIdx() == 0) VectorProbe(a, probe);
  }
}

// a, b: half buffers of a_elems, b_elems (the probe reads what its layout spans); y: C, fp32,
// y_elems (at row pitch orgN). Returns 0 when the run was clean, else 1 with the simulator's error.
extern "C" int asim_run_selftest_fields(int32_t probe, const void* a, uint64_t a_elems, const void* b,
                                        uint64_t b_elems, float* y, uint64_t y_elems, char* error,
                                        uint64_t error_bytes) {
  std::string workspace(sim::kReservedWorkspace + 4096, '\0');
  auto* ws = reinterpret_cast<uint8_t*>(&workspace[0]);
  sim::NextLaunch() = sim::LaunchArgs{
      0,
      {{reinterpret_cast<const uint8_t*>(a), a_elems * 2, "a", sim::GmRole::Input},
       {reinterpret_cast<const uint8_t*>(b), b_elems * 2, "b", sim::GmRole::Input},
       {reinterpret_cast<const uint8_t*>(y), y_elems * 4, "y"},
       {ws, sim::kReservedWorkspace, "system workspace", sim::GmRole::SystemWorkspace},
       {ws + sim::kReservedWorkspace, 4096, "user workspace", sim::GmRole::Workspace}},
      sim::Soc910B(),
      sim::LaunchKind::MixAic1To2,
      sim::Schedule{sim::kDefaultSeed, false}};
  int32_t probe_value = probe;
  try {
    ICPU_RUN_KF(selftest_fields, 1, (GM_ADDR)a, (GM_ADDR)b, (GM_ADDR)y, (GM_ADDR)ws, (GM_ADDR)&probe_value);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_bytes, "%s", e.what());
    return 1;
  }
}
