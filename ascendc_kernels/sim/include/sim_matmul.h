// The Matmul high-level API on a cube core (AIC) of a MIX launch, with the documented
// prototypes: MatmulType, Matmul<A, B, C, BIAS>, REGIST_MATMUL_OBJ, SetOrgShape,
// SetSingleShape, SetTensorA/B (with transposition), Iterate, GetTensorC, IterateAll, End.
// Operands are ND matrices in GM; C is fp32 in GM (written, or added with enAtomic = 1).
//
// Strict like the rest of the simulator. At registration: called on the AIC of a MIX
// kernel, before any TPipe::InitBuffer, with the system workspace, at most 4 objects;
// the TCubeTiling's base block obeys the fractal rules (baseM, baseN multiples of 16,
// baseK a multiple of 32 bytes of the input type) and fits L0A/L0B (double-buffered when
// dbL0A/dbL0B = 2) and L0C (fp32), and the L1 depths of all registered objects fit L1
// together. At use: shapes within the org shape and the tiling's singleCore sizes, a
// transposed operand only when its MatmulType allows it, operands set before Iterate.
//
// Numerics: half/bfloat16 products are exact in fp32; each C element is accumulated in
// fp32 over K in order. Costs: 2·m·n·k cube FLOPs per block, and GM reads of the A and B
// tiles a block loads into L1: blocks go M-outer, N-inner; an A panel (baseM rows, all
// of K) stays in L1 across the N blocks of one M block when the tiling's depthA1 holds
// all of K, otherwise it is re-read; B's panel is read for every block (reuse of B across
// M blocks is not modelled).
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

enum class CubeFormat : uint8_t { ND = 0, NZ, ZN, ZZ, NN, ND_ALIGN, SCALAR, VECTOR };

// The Matmul tiling the host computes (CANN: matmul_tiling::MultiCoreMatmulTiling ->
// TCubeTiling). The fields the simulator reads; the rest of CANN's struct is not modelled.
struct TCubeTiling {
  int32_t usedCoreNum = 1;
  int32_t M = 0, N = 0, Ka = 0, Kb = 0;
  int32_t singleCoreM = 0, singleCoreN = 0, singleCoreK = 0;
  int32_t baseM = 0, baseN = 0, baseK = 0;
  int32_t depthA1 = 1, depthB1 = 1;
  int32_t stepM = 1, stepN = 1;
  int32_t isBias = 0;
  int32_t iterateOrder = 0;
  int32_t stepKa = 1, stepKb = 1;
  int32_t dbL0A = 1, dbL0B = 1, dbL0C = 1;
};

namespace sim {

// Checks a TCubeTiling against the cube's buffers; returns the L1 bytes it reserves.
uint64_t CheckCubeTiling(const TCubeTiling& t, uint32_t a_bytes, uint32_t b_bytes);

// One registered Matmul object's runtime state (type-erased: element sizes and loaders).
struct MatmulState {
  const TCubeTiling* tiling = nullptr;
  bool registered = false;
  uint32_t a_bytes = 2, b_bytes = 2;
  bool a_may_transpose = false, b_may_transpose = false;
  float (*load_a)(const void*, uint64_t) = nullptr;
  float (*load_b)(const void*, uint64_t) = nullptr;
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

void MatmulRegister(MatmulState& s);
bool MatmulIterate(MatmulState& s);
// Writes (or with atomic adds) the current block to C at `c` (fp32, `c_elems` elements).
void MatmulStoreC(MatmulState& s, float* c, uint64_t c_elems, uint8_t enAtomic);
void MatmulCheckReady(const MatmulState& s);

template <typename T>
float LoadAs(const void* p, uint64_t i) { return static_cast<float>(static_cast<const T*>(p)[i]); }

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

template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE = C_TYPE>
class Matmul {
  using SrcAT = typename A_TYPE::T;
  using SrcBT = typename B_TYPE::T;
  using DstT = typename C_TYPE::T;
  static_assert(A_TYPE::pos == TPosition::GM && B_TYPE::pos == TPosition::GM && C_TYPE::pos == TPosition::GM,
                "simulator: the Matmul API is modelled with A, B and C in GM only");
  static_assert(A_TYPE::format == CubeFormat::ND && B_TYPE::format == CubeFormat::ND &&
                    C_TYPE::format == CubeFormat::ND,
                "simulator: the Matmul API is modelled for ND matrices only");
  static_assert(std::is_same<DstT, float>::value, "simulator: the Matmul API is modelled with an fp32 C only");
  static_assert(std::is_same<SrcAT, SrcBT>::value, "A and B must have the same type");

 public:
  void SetOrgShape(int orgM, int orgN, int orgK) { SetOrgShape(orgM, orgN, orgK, orgK); }
  void SetOrgShape(int orgM, int orgN, int orgKa, int orgKb, int orgKc = 0) {
    sim::CallScope scope("Matmul::SetOrgShape");
    Ready();
    if (orgM <= 0 || orgN <= 0 || orgKa <= 0 || orgKb <= 0)
      sim::Fail("org shape must be positive, got M " + std::to_string(orgM) + " N " + std::to_string(orgN) + " Ka " +
                std::to_string(orgKa) + " Kb " + std::to_string(orgKb));
    if (orgKc != 0 && orgKc != orgN) sim::Fail("orgKc other than orgN is not modelled");
    s_.org_m = orgM; s_.org_n = orgN; s_.org_ka = orgKa; s_.org_kb = orgKb;
  }
  void SetSingleShape(int singleM, int singleN, int singleK) {
    sim::CallScope scope("Matmul::SetSingleShape");
    Ready();
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
    return sim::MatmulIterate(s_);
  }
  template <bool sync = true>
  void GetTensorC(const GlobalTensor<DstT>& gm, uint8_t enAtomic = 0, bool enSequentialWrite = false) {
    static_assert(sync, "simulator: asynchronous GetTensorC is not modelled");
    sim::CallScope scope("Matmul::GetTensorC");
    Ready();
    if (enSequentialWrite) sim::Fail("enSequentialWrite is not modelled");
    sim::MatmulStoreC(s_, gm.Raw(), gm.GetSize(), enAtomic);
  }
  template <bool sync = true>
  void IterateAll(const GlobalTensor<DstT>& gm, uint8_t enAtomic = 0, bool enSequentialWrite = false,
                  bool waitIterateAll = false, bool fakeMsg = false) {
    static_assert(sync, "simulator: asynchronous IterateAll is not modelled");
    sim::CallScope scope("Matmul::IterateAll");
    Ready();
    if (enSequentialWrite || waitIterateAll || fakeMsg) sim::Fail("only IterateAll(gm, enAtomic) is modelled");
    while (sim::MatmulIterate(s_)) sim::MatmulStoreC(s_, gm.Raw(), gm.GetSize(), enAtomic);
  }
  void End() { s_.block = -1; }

  // --- simulator internals ---
  sim::MatmulState& State() {
    s_.a_bytes = sizeof(SrcAT);
    s_.b_bytes = sizeof(SrcBT);
    s_.a_may_transpose = A_TYPE::isTrans;
    s_.b_may_transpose = B_TYPE::isTrans;
    s_.load_a = &sim::LoadAs<SrcAT>;
    s_.load_b = &sim::LoadAs<SrcBT>;
    return s_;
  }

 private:
  void Ready() const {
    if (!s_.registered) sim::Fail("Matmul object used before REGIST_MATMUL_OBJ registered it");
  }
  sim::MatmulState s_;
};

}  // namespace AscendC

namespace sim {

inline void RegisterMatmuls(AscendC::TPipe*, GM_ADDR) {}

template <class MM, typename... Rest>
void RegisterMatmuls(AscendC::TPipe* pipe, GM_ADDR workspace, MM& mm, const TCubeTiling* tiling, Rest&&... rest) {
  MatmulState& s = mm.State();
  s.tiling = tiling;
  MatmulRegister(s);
  RegisterMatmuls(pipe, workspace, std::forward<Rest>(rest)...);
}

void RegisterMatmulsBegin(AscendC::TPipe* pipe, GM_ADDR workspace);

}  // namespace sim

// REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm0, &tiling0, mm1, &tiling1, ...)
#define REGIST_MATMUL_OBJ(tpipe, workspace, ...)          \
  do {                                                    \
    sim::CallScope regist_scope_("REGIST_MATMUL_OBJ");    \
    sim::RegisterMatmulsBegin((tpipe), (workspace));      \
    sim::RegisterMatmuls((tpipe), (workspace), __VA_ARGS__); \
  } while (0)
