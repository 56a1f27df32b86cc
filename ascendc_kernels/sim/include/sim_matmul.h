// The Matmul high-level API with the documented prototypes: MatmulType, MatmulImpl<A, B,
// C, BIAS> (and Matmul, the name lib/matmul_intf.h gives it), Init, REGIST_MATMUL_OBJ,
// SetOrgShape, SetSingleShape, SetTensorA/B (with transposition), Iterate, GetTensorC,
// IterateAll, End. Operands are ND matrices in GM; C is in GM: fp32 (written, or added
// with enAtomic = 1), or half / bfloat16_t, which the fixpipe rounds from fp32 with
// CAST_RINT on the way out (QuantMode_t F322F16 / F322BF16, AscendC docs Fixpipe
// 6.2.3.2.1.12) and writes (an atomic add into a 16-bit C is not modelled).
//
// Who runs the cube, as asc-devkit's kfc_register_obj.h / matmul_intf.h define it for a
// MIX kernel (the macros are in lib/matmul_intf.h):
//   - MatmulImpl::Init(&tiling, &pipe) on the AIC, or REGIST_MATMUL_OBJ in a kernel that
//     defines ASCENDC_CUBE_ONLY before lib/matmul_intf.h: the AIC drives the cube itself
//     (CANN's own FLCE kernel works this way). REGIST_MATMUL_OBJ then returns from the
//     calling function on an AIV (the vector binary's expansion is `return`).
//   - REGIST_MATMUL_OBJ without ASCENDC_CUBE_ONLY (KFC): the AIC becomes a server. It
//     runs only the Matmul calls its AIVs send as clients (each AIV's REGIST_MATMUL_OBJ
//     opens one, which ends when the calling function returns), then returns from the
//     function that called REGIST_MATMUL_OBJ; the kernel's own AIC code after it never
//     runs. A server whose AIVs never open a client waits forever: a hang.
//
// Strict like the rest of the simulator. At Init/registration: on the AIC (a client on
// an AIV), in a MIX kernel, REGIST_MATMUL_OBJ before any TPipe::InitBuffer and (KFC) with
// the system workspace, at most 4 objects; the TCubeTiling is one the Matmul library
// accepts (CheckCubeTiling: fractal-aligned base block that fits L0A/L0B/L0C, steps and
// depths consistent, shareL1Size/shareL0CSize covering what the tiling uses, the fields
// of features we do not model at 0). All objects of one TPipe share one L1 and one L0C
// space from the same start address (asc-devkit kernel_tpipe_base.h, InitShareBufStart /
// AuxShareBufStart: the first object records the start, each later one resets the pool to
// it), so each must fit L1 alone, and an object may load (Iterate/IterateAll) only after
// the object that loaded before it called End() (on the cube core's own objects; KFC
// clients' calls are run by the server one at a time). At use:
// shapes within the org shape and the tiling's singleCore sizes, a transposed operand
// only when its MatmulType allows it, operands set before Iterate.
//
// Field widths (A2, `__NPU_ARCH__` 2201): every L1 fill is the ND->NZ DataCopy asc-devkit's
// DataCopyWrapper::CopyND2NZ issues (impl/adv_api/detail/matmul/stage/copy_cube_in/
// copy_tile_to_cube/data_copy_wrapper_nd.h:80-118), and its Nd2NzParams fields are uint16_t
// on A2 (include/basic_api/kernel_struct_data_copy.h:293-300) with the documented ranges
// (AscendC docs DataCopy, ND2NZ): nValue (the fill's rows) [0, 16384], dValue (its columns)
// [0, 65535], srcDValue (the operand's row pitch in GM: orgKa for A, orgM for A transposed,
// orgN for B, orgKb for B transposed; `gCol`, :85) [1, 65535], dstNzC0Stride (the rows
// rounded up to 16, :97) [1, 16384]. A pitch past 65535 would be truncated to its low 16
// bits and the fill would read the wrong rows, silently: the simulator fails instead. Only a
// MatmulConfig with intrinsicsCheck (GetNormalConfig(true)) takes such a pitch: the library
// then copies a fill row by row (nValue 1, srcDValue = the fill's width, :108-113) whenever
// gCol >= 65535, at source offsets gCol · i computed in int32 (:112), which the simulator
// checks too. SetOrgShape / SetSingleShape take int (32-bit) as CANN declares them: a
// larger value the kernel passes is refused rather than truncated.
//
// Numerics: half/bfloat16 products are exact in fp32; each C element is accumulated in
// fp32 over K in order. Costs: 2·m·n·k cube FLOPs per block, and GM reads of the A and B
// tiles a block loads into L1: blocks go M-outer, N-inner; an A panel (baseM rows, all
// of K) stays in L1 across the N blocks of one M block when the tiling's depthA1 holds
// all of K, otherwise it is re-read; B's panel is read for every block (reuse of B across
// M blocks is not modelled). Pipes: operand loads are MTE2 accesses, C stores FIX
// accesses ordered after the loads (the library's own flags).
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "sim_cross_core.h"
#include "sim_dtypes.h"
#include "sim_runtime.h"
#include "sim_tensor.h"
#include "sim_workspace.h"
#include "kernel_tiling/kernel_tiling.h"

enum class CubeFormat : uint8_t { ND = 0, NZ, ZN, ZZ, NN, ND_ALIGN, SCALAR, VECTOR };

// MatmulConfig as asc-devkit declares it (include/adv_api/matmul/matmul_config.h), reduced
// to the fields the simulator reads; GetNormalConfig's first three parameters as CANN's
// (include/adv_api/matmul/tiling.h:36): intrinsicsLimit sets intrinsicsCheck, the
// row-by-row GM->L1 copy of an operand whose row pitch is past 65535 elements.
struct MatmulConfig {
  bool doNorm;
  bool intrinsicsCheck;
  bool isNBatch;
  bool enVecND2NZ;
};
constexpr MatmulConfig GetNormalConfig(const bool intrinsicsLimit = false, const bool batchLoop = false,
                                       const bool isVecND2NZ = false) {
  return MatmulConfig{true, intrinsicsLimit, batchLoop, isVecND2NZ};
}
constexpr MatmulConfig CFG_NORM = GetNormalConfig();

namespace sim {

// Checks a TCubeTiling as the Matmul library reads it, against the cube's buffers;
// returns the L1 bytes it reserves.
uint64_t CheckCubeTiling(const TCubeTiling& t, uint32_t a_bytes, uint32_t b_bytes);

// A Matmul API argument CANN declares int: refused when int would truncate it.
void CheckInt32(const char* name, int64_t value);

// How a Matmul object reaches the cube.
enum class MatmulRoute : uint8_t { None, Direct, KfcClient };

// One registered Matmul object's runtime state (type-erased: element sizes and loaders).
struct MatmulState {
  const TCubeTiling* tiling = nullptr;
  bool registered = false;
  uint32_t index = 0;         // 1, 2, ...: the order Init/REGIST_MATMUL_OBJ registered it on its core
  MatmulRoute route = MatmulRoute::None;
  uint32_t a_bytes = 2, b_bytes = 2;
  bool intrinsics_check = false;  // MatmulConfig::intrinsicsCheck: row-by-row fills past a 16-bit pitch
  bool a_may_transpose = false, b_may_transpose = false;
  float (*load_a)(const void*, uint64_t) = nullptr;
  float (*load_b)(const void*, uint64_t) = nullptr;
  uint32_t c_bytes = 4;                                  // C's element: fp32, or half / bfloat16_t
  void (*store_c)(void*, uint64_t, float) = nullptr;     // writes one C element (the fixpipe's cast)
  // Set by the calls:
  int64_t org_m = -1, org_n = -1, org_ka = -1, org_kb = -1;
  int64_t single_m = -1, single_n = -1, single_k = -1;
  const uint8_t* a = nullptr; uint64_t a_elems = 0; bool a_trans = false;
  const uint8_t* b = nullptr; uint64_t b_elems = 0; bool b_trans = false;
  // Iteration over base blocks (M outer, N inner).
  int64_t block = -1, blocks_m = 0, blocks_n = 0;
  int64_t a_resident_m = -1;  // the M block whose A panel is in L1
  std::vector<float> c;       // the current block, fp32 (L0C)
  int64_t c_rows = 0, c_cols = 0, c_row0 = 0, c_col0 = 0;
};

// Init / REGIST_MATMUL_OBJ of one object on this core (Direct: the AIC drives the cube;
// KfcClient: an AIV's object whose calls its AIC's server runs).
void MatmulRegister(MatmulState& s, MatmulRoute route);
// Before each call of a KFC client: its AI core's server must be serving (blocks until it is).
void KfcClientCall(const MatmulState& s);
// After a KFC client call: the AIV waited for the server's answer, so every pipe of it is
// ordered after the cube's work.
void KfcClientReturn(const MatmulState& s);
bool MatmulIterate(MatmulState& s);
// End(): the object's L1/L0C contents are done with; another object on the TPipe may load.
void MatmulEnd(MatmulState& s);
// Writes (or with atomic adds) the current block to C at `c` (`c_elems` elements of C's type).
void MatmulStoreC(MatmulState& s, void* c, uint64_t c_elems, uint8_t enAtomic);
void MatmulCheckReady(const MatmulState& s);

template <typename T>
float LoadAs(const void* p, uint64_t i) { return static_cast<float>(static_cast<const T*>(p)[i]); }

// The fixpipe's store of one fp32 L0C element into C's type (F322F16 / F322BF16: CAST_RINT,
// saturating like the vector Cast).
template <typename T>
void StoreAs(void* p, uint64_t i, float v) {
  if constexpr (std::is_same<T, float>::value) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<T*>(p)[i] = Saturate(RoundTo<T>(v, AscendC::RoundMode::CAST_RINT), v);
  }
}

}  // namespace sim

namespace AscendC {

template <TPosition POSITION, CubeFormat FORMAT, typename TYPE, bool ISTRANS = false>
struct MatmulType {
  static constexpr TPosition pos = POSITION;
  static constexpr CubeFormat format = FORMAT;
  using T = TYPE;
  static constexpr bool isTrans = ISTRANS;
};

class TPipe;

template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE = C_TYPE, const auto& MM_CFG = CFG_NORM>
class MatmulImpl {
  using SrcAT = typename A_TYPE::T;
  using SrcBT = typename B_TYPE::T;
  using DstT = typename C_TYPE::T;
  static_assert(A_TYPE::pos == TPosition::GM && B_TYPE::pos == TPosition::GM && C_TYPE::pos == TPosition::GM,
                "simulator: the Matmul API is modelled with A, B and C in GM only");
  static_assert(A_TYPE::format == CubeFormat::ND && B_TYPE::format == CubeFormat::ND &&
                    C_TYPE::format == CubeFormat::ND,
                "simulator: the Matmul API is modelled for ND matrices only");
  static_assert(std::is_same<DstT, float>::value || std::is_same<DstT, half>::value ||
                    std::is_same<DstT, bfloat16_t>::value,
                "simulator: the Matmul API is modelled with an fp32, half or bfloat16_t C only");
  static_assert(std::is_same<SrcAT, SrcBT>::value, "A and B must have the same type");
  static_assert(MM_CFG.doNorm && !MM_CFG.isNBatch && !MM_CFG.enVecND2NZ,
                "simulator: only the Norm template (GetNormalConfig(intrinsicsLimit)) is modelled");

 public:
  // The cube core's own Matmul (CANN: MatmulImpl::Init(tiling, tpipe)).
  void Init(const TCubeTiling* cubeTiling, TPipe* tpipe = nullptr) {
    sim::CallScope scope("Matmul::Init");
    (void)tpipe;
    sim::MatmulState& s = State();
    s.tiling = cubeTiling;
    sim::MatmulRegister(s, sim::MatmulRoute::Direct);
  }
  // CANN declares these int: the simulator takes the kernel's value at full width and
  // refuses one that int would truncate.
  void SetOrgShape(int64_t orgM, int64_t orgN, int64_t orgK) { SetOrgShape(orgM, orgN, orgK, orgK); }
  void SetOrgShape(int64_t orgM, int64_t orgN, int64_t orgKa, int64_t orgKb, int64_t orgKc = 0) {
    sim::CallScope scope("Matmul::SetOrgShape");
    Ready();
    sim::CheckInt32("orgM", orgM); sim::CheckInt32("orgN", orgN); sim::CheckInt32("orgKa", orgKa);
    sim::CheckInt32("orgKb", orgKb); sim::CheckInt32("orgKc", orgKc);
    if (orgM <= 0 || orgN <= 0 || orgKa <= 0 || orgKb <= 0)
      sim::Fail("org shape must be positive, got M " + std::to_string(orgM) + " N " + std::to_string(orgN) + " Ka " +
                std::to_string(orgKa) + " Kb " + std::to_string(orgKb));
    if (orgKc != 0 && orgKc != orgN) sim::Fail("orgKc other than orgN is not modelled");
    s_.org_m = orgM; s_.org_n = orgN; s_.org_ka = orgKa; s_.org_kb = orgKb;
  }
  void SetSingleShape(int64_t singleM, int64_t singleN, int64_t singleK) {
    sim::CallScope scope("Matmul::SetSingleShape");
    Ready();
    sim::CheckInt32("singleM", singleM); sim::CheckInt32("singleN", singleN); sim::CheckInt32("singleK", singleK);
    const TCubeTiling& t = *s_.tiling;
    if (singleM <= 0 || singleN <= 0 || singleK <= 0)
      sim::Fail("single shape must be positive, got " + std::to_string(singleM) + " x " + std::to_string(singleN) +
                " x " + std::to_string(singleK));
    if (singleM > t.singleCoreM || singleN > t.singleCoreN || singleK > t.singleCoreK)
      sim::Fail("single shape " + std::to_string(singleM) + " x " + std::to_string(singleN) + " x " +
                std::to_string(singleK) + " exceeds the tiling's singleCore " + std::to_string(t.singleCoreM) + " x " +
                std::to_string(t.singleCoreN) + " x " + std::to_string(t.singleCoreK));
    s_.single_m = singleM; s_.single_n = singleN; s_.single_k = singleK;
    s_.block = -1;
  }
  void SetTensorA(const GlobalTensor<SrcAT>& gm, bool isTransposeA = false) {
    sim::CallScope scope("Matmul::SetTensorA");
    Ready();
    if (isTransposeA && !A_TYPE::isTrans)
      sim::Fail("SetTensorA(gm, true) but A's MatmulType was declared without ISTRANS = true");
    s_.a = reinterpret_cast<const uint8_t*>(gm.Raw()); s_.a_elems = gm.GetSize(); s_.a_trans = isTransposeA;
    s_.block = -1;
    s_.a_resident_m = -1;
  }
  void SetTensorB(const GlobalTensor<SrcBT>& gm, bool isTransposeB = false) {
    sim::CallScope scope("Matmul::SetTensorB");
    Ready();
    if (isTransposeB && !B_TYPE::isTrans)
      sim::Fail("SetTensorB(gm, true) but B's MatmulType was declared without ISTRANS = true");
    s_.b = reinterpret_cast<const uint8_t*>(gm.Raw()); s_.b_elems = gm.GetSize(); s_.b_trans = isTransposeB;
    s_.block = -1;
  }
  template <bool sync = true>
  bool Iterate(bool enPartialSum = false) {
    static_assert(sync, "simulator: asynchronous Iterate is not modelled");
    sim::CallScope scope("Matmul::Iterate");
    Ready();
    if (enPartialSum) sim::Fail("enPartialSum is not modelled");
    sim::KfcClientCall(s_);
    const bool more = sim::MatmulIterate(s_);
    sim::KfcClientReturn(s_);
    return more;
  }
  template <bool sync = true>
  void GetTensorC(const GlobalTensor<DstT>& gm, uint8_t enAtomic = 0, bool enSequentialWrite = false) {
    static_assert(sync, "simulator: asynchronous GetTensorC is not modelled");
    sim::CallScope scope("Matmul::GetTensorC");
    Ready();
    if (enSequentialWrite) sim::Fail("enSequentialWrite is not modelled");
    sim::KfcClientCall(s_);
    sim::MatmulStoreC(s_, gm.Raw(), gm.GetSize(), enAtomic);
    sim::KfcClientReturn(s_);
  }
  template <bool sync = true>
  void IterateAll(const GlobalTensor<DstT>& gm, uint8_t enAtomic = 0, bool enSequentialWrite = false,
                  bool waitIterateAll = false, bool fakeMsg = false) {
    static_assert(sync, "simulator: asynchronous IterateAll is not modelled");
    sim::CallScope scope("Matmul::IterateAll");
    Ready();
    if (enSequentialWrite || waitIterateAll || fakeMsg) sim::Fail("only IterateAll(gm, enAtomic) is modelled");
    sim::KfcClientCall(s_);
    while (sim::MatmulIterate(s_)) sim::MatmulStoreC(s_, gm.Raw(), gm.GetSize(), enAtomic);
    sim::KfcClientReturn(s_);
  }
  void End() {
    sim::CallScope scope("Matmul::End");
    Ready();
    sim::MatmulEnd(s_);
  }

  // --- simulator internals ---
  sim::MatmulState& State() {
    s_.a_bytes = sizeof(SrcAT);
    s_.b_bytes = sizeof(SrcBT);
    s_.intrinsics_check = MM_CFG.intrinsicsCheck;
    s_.a_may_transpose = A_TYPE::isTrans;
    s_.b_may_transpose = B_TYPE::isTrans;
    s_.load_a = &sim::LoadAs<SrcAT>;
    s_.load_b = &sim::LoadAs<SrcBT>;
    s_.c_bytes = sizeof(DstT);
    s_.store_c = &sim::StoreAs<DstT>;
    return s_;
  }

 private:
  void Ready() const {
    if (!s_.registered) sim::Fail("Matmul object used before Init or REGIST_MATMUL_OBJ registered it");
  }
  sim::MatmulState s_;
};

// lib/matmul_intf.h's name for it (the KFC client on an AIV is the same class here: the
// simulator routes its calls by how the object was registered).
template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE = C_TYPE, const auto& MM_CFG = CFG_NORM>
using Matmul = MatmulImpl<A_TYPE, B_TYPE, C_TYPE, BIAS_TYPE, MM_CFG>;

}  // namespace AscendC

namespace sim {

inline void RegisterMatmuls(MatmulRoute) {}

template <class MM, typename... Rest>
void RegisterMatmuls(MatmulRoute route, MM& mm, const TCubeTiling* tiling, Rest&&... rest) {
  MatmulState& s = mm.State();
  s.tiling = tiling;
  MatmulRegister(s, route);
  RegisterMatmuls(route, std::forward<Rest>(rest)...);
}

// REGIST_MATMUL_OBJ's common checks (MIX kernel, before InitBuffer; KFC: the system workspace).
void RegisterMatmulsBegin(GM_ADDR workspace, bool kfc);

// KFC: the AIC serves its AIVs' clients until both have ended (a hang if they never come).
void KfcServe();

// KFC: an AIV's client, open from its REGIST_MATMUL_OBJ to the end of the calling function.
class KfcClient {
 public:
  KfcClient();
  ~KfcClient();
  KfcClient(const KfcClient&) = delete;
  KfcClient& operator=(const KfcClient&) = delete;
};

}  // namespace sim

// REGIST_MATMUL_OBJ itself is defined by lib/matmul_intf.h (it depends on ASCENDC_CUBE_ONLY).
