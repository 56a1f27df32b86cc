// The Matmul high-level API's checks, block iteration, fp32 arithmetic and cost counting,
// and the KFC server/client model of REGIST_MATMUL_OBJ (see sim_matmul.h for the rules).
#include "sim_matmul.h"

#include <climits>
#include <sstream>

namespace sim {
namespace {

constexpr uint32_t kFractal = 16;        // rows/columns of a cube fractal
constexpr uint32_t kFractalKBytes = 32;  // bytes of K in a fractal row (16 half elements)

std::string Num(int64_t x) { return std::to_string(x); }

constexpr const char* kNd2NzStruct = "asc-devkit include/basic_api/kernel_struct_data_copy.h";
constexpr const char* kNd2NzWrapper =
    "asc-devkit impl/adv_api/detail/matmul/stage/copy_cube_in/copy_tile_to_cube/data_copy_wrapper_nd.h";

// One Nd2NzParams field of an L1 fill against its A2 range; `line` is its declaration.
void CheckNd2NzField(const char* operand, const char* field, int64_t value, int64_t lo, int64_t hi, int line,
                     const std::string& what) {
  if (value >= lo && value <= hi) return;
  Fail(std::string("Matmul ") + operand + " load: Nd2NzParams." + field + " = " + Num(value) + " (" + what +
       ") is outside [" + Num(lo) + ", " + Num(hi) + "]: on A2 it is a uint16_t (" + kNd2NzStruct + ":" + Num(line) +
       "), so the device would copy with " + Num(value & 0xFFFF) + " instead and read the wrong elements, silently");
}

// The ND->NZ copy of one L1 fill of an operand: `height` rows of `width` elements at row
// pitch `pitch` (gCol) in GM, as DataCopyWrapper::CopyND2NZ issues it on A2.
void CheckNd2NzFill(const char* operand, int64_t height, int64_t width, int64_t pitch, bool intrinsics_check) {
  const bool row_by_row = intrinsics_check && pitch >= 65535;  // data_copy_wrapper_nd.h:105-113
  CheckNd2NzField(operand, "nValue", row_by_row ? 1 : height, 0, 16384, 297, "the fill's rows");
  CheckNd2NzField(operand, "dValue", width, 0, 65535, 298, "the fill's columns");
  if (row_by_row) {
    CheckNd2NzField(operand, "srcDValue", width, 1, 65535, 300, "the fill's columns, copied row by row");
    // Each row's source offset is srcOffset + gCol * i with gCol and i int32 (:112).
    if (pitch * (height - 1) > INT32_MAX)
      Fail(std::string("Matmul ") + operand + " load: the row-by-row copy's offset gCol · i = " + Num(pitch) + " · " +
           Num(height - 1) + " is past int32 (" + kNd2NzWrapper + ":112): the device would read the wrong rows");
  } else {
    CheckNd2NzField(operand, "srcDValue", pitch, 1, 65535, 300,
                    std::string("the operand's row pitch in GM, gCol, ") + kNd2NzWrapper +
                        ":85; a MatmulConfig with intrinsicsCheck, GetNormalConfig(true), copies such a fill row by row");
  }
  CheckNd2NzField(operand, "dstNzC0Stride", (height + 15) / 16 * 16, 1, 16384, 301, "the fill's rows rounded up to 16");
}

}  // namespace

void CheckInt32(const char* name, int64_t value) {
  if (value < INT32_MIN || value > INT32_MAX)
    Fail(std::string(name) + " = " + Num(value) + " does not fit the int CANN's Matmul API takes (it would be "
         "truncated to " + Num(static_cast<int32_t>(static_cast<uint32_t>(value))) + ")");
}

uint64_t CheckCubeTiling(const TCubeTiling& t, uint32_t a_bytes, uint32_t b_bytes) {
  const SocSpec& soc = *Ctx().launch->soc;
  if (t.usedCoreNum < 1 || uint32_t(t.usedCoreNum) > soc.aiCores)
    Fail("TCubeTiling usedCoreNum " + Num(t.usedCoreNum) + " outside [1, " + Num(soc.aiCores) + "]");
  if (t.M <= 0 || t.N <= 0 || t.Ka <= 0 || t.Kb <= 0)
    Fail("TCubeTiling M, N, Ka, Kb must be positive, got " + Num(t.M) + ", " + Num(t.N) + ", " + Num(t.Ka) + ", " +
         Num(t.Kb));
  if (t.singleCoreM <= 0 || t.singleCoreN <= 0 || t.singleCoreK <= 0)
    Fail("TCubeTiling singleCoreM/N/K must be positive");
  if (t.singleCoreM > t.M || t.singleCoreN > t.N || t.singleCoreK > std::min(t.Ka, t.Kb))
    Fail("TCubeTiling singleCore " + Num(t.singleCoreM) + " x " + Num(t.singleCoreN) + " x " + Num(t.singleCoreK) +
         " exceeds M x N x K " + Num(t.M) + " x " + Num(t.N) + " x " + Num(std::min(t.Ka, t.Kb)));
  if (t.baseM <= 0 || t.baseN <= 0 || t.baseK <= 0)
    Fail("TCubeTiling base block must be positive, got baseM " + Num(t.baseM) + " baseN " + Num(t.baseN) + " baseK " +
         Num(t.baseK));
  if (t.baseM % kFractal || t.baseN % kFractal)
    Fail("TCubeTiling baseM " + Num(t.baseM) + " / baseN " + Num(t.baseN) + " not a multiple of the 16-row fractal");
  if ((uint64_t(t.baseK) * a_bytes) % kFractalKBytes)
    Fail("TCubeTiling baseK " + Num(t.baseK) + " is not a multiple of 32 bytes of the input type (fractal K)");
  if (t.stepM != 1 || t.stepN != 1) Fail("stepM/stepN other than 1 are not modelled (got " + Num(t.stepM) + ", " +
                                         Num(t.stepN) + ")");
  if (t.iterateOrder != 0) Fail("iterateOrder other than 0 is not modelled");
  if (t.isBias) Fail("bias is not modelled");
  if (t.dbL0A < 1 || t.dbL0A > 2 || t.dbL0B < 1 || t.dbL0B > 2 || t.dbL0C < 1 || t.dbL0C > 2)
    Fail("dbL0A/dbL0B/dbL0C must be 1 or 2, got " + Num(t.dbL0A) + ", " + Num(t.dbL0B) + ", " + Num(t.dbL0C));
  const uint64_t l0a = uint64_t(t.baseM) * t.baseK * a_bytes * t.dbL0A;
  const uint64_t l0b = uint64_t(t.baseN) * t.baseK * b_bytes * t.dbL0B;
  const uint64_t l0c = uint64_t(t.baseM) * t.baseN * 4 * t.dbL0C;
  if (l0a > soc.l0aBytes) Fail("L0A overflow: baseM x baseK x dbL0A = " + Num(l0a) + " bytes > " + Num(soc.l0aBytes));
  if (l0b > soc.l0bBytes) Fail("L0B overflow: baseN x baseK x dbL0B = " + Num(l0b) + " bytes > " + Num(soc.l0bBytes));
  if (l0c > soc.l0cBytes)
    Fail("L0C overflow: baseM x baseN x 4 (fp32) x dbL0C = " + Num(l0c) + " bytes > " + Num(soc.l0cBytes));
  // The library loads stepKa (stepKb) base blocks of K per L1 fill and keeps depthA1
  // (depthB1) of them: one or two fills (double-buffered L1); the larger K step a
  // multiple of the smaller.
  if (t.stepKa < 1 || t.stepKb < 1) Fail("TCubeTiling stepKa/stepKb must be >= 1");
  if (std::max(t.stepKa, t.stepKb) % std::min(t.stepKa, t.stepKb))
    Fail("TCubeTiling stepKa " + Num(t.stepKa) + " and stepKb " + Num(t.stepKb) + ": one must be a multiple of the other");
  const int32_t fillA = t.stepM * t.stepKa, fillB = t.stepN * t.stepKb;
  if (t.depthA1 < fillA || t.depthA1 % fillA || t.depthA1 / fillA > 2 || t.depthB1 < fillB || t.depthB1 % fillB ||
      t.depthB1 / fillB > 2)
    Fail("TCubeTiling depthA1 " + Num(t.depthA1) + " / depthB1 " + Num(t.depthB1) +
         " must be 1 or 2 L1 fills of stepM x stepKa = " + Num(fillA) + " / stepN x stepKb = " + Num(fillB) +
         " base blocks");
  const uint64_t l1 = uint64_t(t.depthA1) * t.baseM * t.baseK * a_bytes + uint64_t(t.depthB1) * t.baseN * t.baseK * b_bytes;
  if (l1 > soc.l1Bytes)
    Fail("L1 overflow: the depthA1/depthB1 buffers need " + Num(l1) + " bytes > " + Num(soc.l1Bytes));
  // What the library sizes from these two: GetTiling writes the L1 and L0C it uses there.
  if (t.shareMode != 0) Fail("shareMode other than 0 is not modelled");
  if (uint64_t(t.shareL1Size) < l1 || uint64_t(t.shareL1Size) > soc.l1Bytes)
    Fail("TCubeTiling shareL1Size " + Num(t.shareL1Size) + " must cover the depthA1/depthB1 buffers (" + Num(l1) +
         " bytes) and fit L1 (" + Num(soc.l1Bytes) + ")");
  const uint64_t l0c_block = uint64_t(t.baseM) * t.baseN * 4;  // the library reports one block
  if (uint64_t(t.shareL0CSize) < l0c_block || uint64_t(t.shareL0CSize) > soc.l0cBytes)
    Fail("TCubeTiling shareL0CSize " + Num(t.shareL0CSize) + " must cover one L0C block (" + Num(l0c_block) +
         " bytes) and fit L0C (" + Num(soc.l0cBytes) + ")");
  if (t.shareUbSize < 0 || uint64_t(t.shareUbSize) > soc.ubBytes || t.transLength < 0)
    Fail("TCubeTiling shareUbSize / transLength out of range");
  // Batch, UB-cached operands, layouts and MX formats: the library reads these only for
  // features the simulator does not model, so they must be unset.
  if (t.batchM > 1 || t.batchN > 1 || t.singleBatchM > 1 || t.singleBatchN > 1 || t.BatchNum > 1 ||
      t.depthAL1CacheUB || t.depthBL1CacheUB || t.mxTypePara || t.ALayoutInfoB || t.ALayoutInfoS || t.ALayoutInfoN ||
      t.ALayoutInfoG || t.ALayoutInfoD || t.BLayoutInfoB || t.BLayoutInfoS || t.BLayoutInfoN || t.BLayoutInfoG ||
      t.BLayoutInfoD || t.CLayoutInfoB || t.CLayoutInfoS1 || t.CLayoutInfoN || t.CLayoutInfoG || t.CLayoutInfoS2)
    Fail("TCubeTiling sets batch, UB-cache, layout or MX fields: batch matmul and those features are not modelled");
  return l1;
}

void RegisterMatmulsBegin(GM_ADDR workspace, bool kfc) {
  BlockContext& c = Ctx();
  if (c.launch->kind != LaunchKind::MixAic1To2)
    Fail("the Matmul API needs a MIX kernel (KERNEL_TYPE_MIX_AIC_1_2): this launch has no cube core");
  if (c.kernel_type < 0) Fail("REGIST_MATMUL_OBJ before KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2)");
  if (c.ub_used != 0) Fail("REGIST_MATMUL_OBJ after TPipe::InitBuffer (the docs require it before)");
  // KFC passes its messages through the system workspace.
  if (kfc && (workspace == nullptr || workspace != c.sys_workspace))
    Fail("REGIST_MATMUL_OBJ needs the system workspace (GetSysWorkSpacePtr()) for its KFC messages");
}

void MatmulRegister(MatmulState& s, MatmulRoute route) {
  BlockContext& c = Ctx();
  if (c.launch->kind != LaunchKind::MixAic1To2 || c.kernel_type < 0)
    Fail("the Matmul API needs a MIX kernel that declared KERNEL_TYPE_MIX_AIC_1_2");
  if (route == MatmulRoute::Direct && c.core != CoreKind::Aic)
    Fail("the Matmul API runs on the cube core: Init it on the AIC (if ASCEND_IS_AIC); an AIV reaches the cube "
         "only as a KFC client (REGIST_MATMUL_OBJ without ASCENDC_CUBE_ONLY)");
  if (s.tiling == nullptr) Fail("a Matmul object registered without its TCubeTiling");
  if (s.registered) Fail("a Matmul object registered twice");
  if (++c.matmul_objects > 4) Fail("more than 4 Matmul objects (the documented limit)");
  // Each object's buffers start where the first object's do (kernel_tpipe_base.h): the
  // objects share L1 rather than split it. CheckCubeTiling checked this one fits alone.
  c.matmul_l1_bytes = std::max(c.matmul_l1_bytes, CheckCubeTiling(*s.tiling, s.a_bytes, s.b_bytes));
  s.index = c.matmul_objects;
  s.registered = true;
  s.route = route;
}

void KfcServe() {
  BlockContext& c = Ctx();
  Launch& l = *c.launch;
  std::unique_lock<std::mutex> lock(l.mutex);
  GroupFlags& f = l.groups[c.group];
  f.kfc_server = true;
  l.cv.notify_all();
  const std::function<bool()> ended = [&] { return f.kfc_client_ended[0] && f.kfc_client_ended[1]; };
  BlockOn(lock, ended,
          "REGIST_MATMUL_OBJ as a KFC server (lib/matmul_intf.h included without ASCENDC_CUBE_ONLY): the AIC runs "
          "only Matmul calls its two AIVs send as clients and returns from the function that called "
          "REGIST_MATMUL_OBJ when both clients have ended, so its own code after the macro never runs (drive the "
          "cube from the AIC with ASCENDC_CUBE_ONLY and MatmulImpl::Init, or call Matmul from the AIVs)");
  f.kfc_server = false;
}

KfcClient::KfcClient() {
  BlockContext& c = Ctx();
  std::lock_guard<std::mutex> lock(c.launch->mutex);
  c.launch->groups[c.group].kfc_client_open[c.sub_block] = true;
}

KfcClient::~KfcClient() {
  if (!InKernel()) return;
  BlockContext& c = Ctx();
  std::lock_guard<std::mutex> lock(c.launch->mutex);
  c.launch->groups[c.group].kfc_client_ended[c.sub_block] = true;
  c.launch->cv.notify_all();
}

void KfcClientCall(const MatmulState& s) {
  if (s.route != MatmulRoute::KfcClient) return;
  BlockContext& c = Ctx();
  Launch& l = *c.launch;
  std::unique_lock<std::mutex> lock(l.mutex);
  GroupFlags& f = l.groups[c.group];
  const std::function<bool()> serving = [&] { return f.kfc_server; };
  BlockOn(lock, serving, std::string(c.call) + ": a KFC client call waits for AIC " + Num(c.group) +
                             " to serve (its REGIST_MATMUL_OBJ)");
}

void KfcClientReturn(const MatmulState& s) {
  if (s.route == MatmulRoute::KfcClient) PipeBarrierAll();
}

void MatmulCheckReady(const MatmulState& s) {
  if (s.org_m < 0) Fail("SetOrgShape not called");
  if (s.single_m < 0) Fail("SetSingleShape not called");
  if (s.a == nullptr || s.b == nullptr) Fail("SetTensorA and SetTensorB must be called before Iterate");
  if (s.single_m > s.org_m || s.single_n > s.org_n)
    Fail("single shape M x N " + Num(s.single_m) + " x " + Num(s.single_n) + " exceeds the org shape " +
         Num(s.org_m) + " x " + Num(s.org_n));
  // K is A's row length (orgKa; A transposed: its row count) and B's (orgKb).
  if (s.single_k > s.org_ka || s.single_k > s.org_kb)
    Fail("single K " + Num(s.single_k) + " exceeds the org K of A (" + Num(s.org_ka) + ") or B (" + Num(s.org_kb) + ")");
  // The last element each operand is read at must lie inside its GlobalTensor.
  const uint64_t a_last = s.a_trans ? uint64_t(s.single_k - 1) * s.org_m + s.single_m - 1
                                    : uint64_t(s.single_m - 1) * s.org_ka + s.single_k - 1;
  const uint64_t b_last = s.b_trans ? uint64_t(s.single_n - 1) * s.org_kb + s.single_k - 1
                                    : uint64_t(s.single_k - 1) * s.org_n + s.single_n - 1;
  if (a_last >= s.a_elems)
    Fail("A spans " + Num(a_last + 1) + " elements at its leading dimension, beyond its GlobalTensor's " +
         Num(s.a_elems));
  if (b_last >= s.b_elems)
    Fail("B spans " + Num(b_last + 1) + " elements at its leading dimension, beyond its GlobalTensor's " +
         Num(s.b_elems));
}

// The object about to load L1 and L0C: on the cube core, every object of the TPipe starts
// at the same address, so the one that loaded before must have called End().
void MatmulClaimBuffers(MatmulState& s) {
  if (s.route != MatmulRoute::Direct) return;
  BlockContext& c = Ctx();
  const auto* live = static_cast<const MatmulState*>(c.matmul_live);
  if (live != nullptr && live != &s) {
    const TCubeTiling& a = *live->tiling;
    const TCubeTiling& b = *s.tiling;
    Fail("Matmul object " + Num(s.index) + " loads L1 and L0C while object " + Num(live->index) +
         " has not called End(): every Matmul object on one TPipe starts at the same L1 and L0C address "
         "(asc-devkit kernel_tpipe_base.h InitShareBufStart/AuxShareBufStart), so they overlap in L1 bytes [0, " +
         Num(std::min(a.shareL1Size, b.shareL1Size)) + ") and L0C bytes [0, " +
         Num(std::min(a.shareL0CSize, b.shareL0CSize)) + ") of the shared space; only End() orders object " +
         Num(s.index) + "'s loads after object " + Num(live->index) + "'s reads (call End() on object " +
         Num(live->index) + " first)");
  }
  c.matmul_live = &s;
}

void MatmulEnd(MatmulState& s) {
  s.block = -1;
  BlockContext& c = Ctx();
  if (c.matmul_live == &s) c.matmul_live = nullptr;
}

bool MatmulIterate(MatmulState& s) {
  MatmulCheckReady(s);
  MatmulClaimBuffers(s);
  const TCubeTiling& t = *s.tiling;
  if (s.block < 0) {
    s.blocks_m = (s.single_m + t.baseM - 1) / t.baseM;
    s.blocks_n = (s.single_n + t.baseN - 1) / t.baseN;
  }
  if (++s.block >= s.blocks_m * s.blocks_n) {
    s.block = -1;
    return false;
  }
  const int64_t bm = s.block / s.blocks_n, bn = s.block % s.blocks_n;
  s.c_row0 = bm * t.baseM;
  s.c_col0 = bn * t.baseN;
  s.c_rows = std::min<int64_t>(t.baseM, s.single_m - s.c_row0);
  s.c_cols = std::min<int64_t>(t.baseN, s.single_n - s.c_col0);
  const int64_t k = s.single_k;
  BlockContext& c = Ctx();
  // The fills' ND->NZ copies: K in stepKa (stepKb) base blocks per fill, the block's rows
  // (columns) of M (N); a transposed operand is stored K-major.
  const int64_t ka_fill = std::min<int64_t>(int64_t(t.baseK) * t.stepKa, k);
  const int64_t kb_fill = std::min<int64_t>(int64_t(t.baseK) * t.stepKb, k);
  if (s.a_trans)
    CheckNd2NzFill("A (transposed)", ka_fill, s.c_rows, s.org_m, s.intrinsics_check);
  else
    CheckNd2NzFill("A", s.c_rows, ka_fill, s.org_ka, s.intrinsics_check);
  if (s.b_trans)
    CheckNd2NzFill("B (transposed)", s.c_cols, kb_fill, s.org_kb, s.intrinsics_check);
  else
    CheckNd2NzFill("B", kb_fill, s.c_cols, s.org_n, s.intrinsics_check);
  c.library_access = true;
  // Bounds of every row / column read (the operands' regions).
  for (int64_t i = 0; i < s.c_rows; ++i) {
    const uint64_t row = s.c_row0 + i;
    if (!s.a_trans) CheckGm(s.a + row * s.org_ka * s.a_bytes, uint64_t(k) * s.a_bytes, "Matmul A load");
  }
  if (s.a_trans)
    for (int64_t p = 0; p < k; ++p)
      CheckGm(s.a + (uint64_t(p) * s.org_m + s.c_row0) * s.a_bytes, uint64_t(s.c_rows) * s.a_bytes, "Matmul A load");
  if (s.b_trans)
    for (int64_t j = 0; j < s.c_cols; ++j)
      CheckGm(s.b + (uint64_t(s.c_col0 + j) * s.org_kb) * s.b_bytes, uint64_t(k) * s.b_bytes, "Matmul B load");
  else
    for (int64_t p = 0; p < k; ++p)
      CheckGm(s.b + (uint64_t(p) * s.org_n + s.c_col0) * s.b_bytes, uint64_t(s.c_cols) * s.b_bytes, "Matmul B load");
  c.library_access = false;
  // GM reads: the A panel unless it is still in L1 (all of K held: depthA1 x baseK >= K),
  // and B's panel for this block.
  const bool a_fits = int64_t(t.depthA1) * t.baseK >= k;
  if (!(a_fits && s.a_resident_m == bm)) c.counters.gm_read_bytes += uint64_t(s.c_rows) * k * s.a_bytes;
  s.a_resident_m = bm;
  c.counters.gm_read_bytes += uint64_t(s.c_cols) * k * s.b_bytes;
  c.counters.cube_flops += 2ull * s.c_rows * s.c_cols * k;
  // fp32 accumulation over K in order (products of half/bf16 values are exact in fp32).
  std::vector<float> a(s.c_rows * k), b(k * s.c_cols);
  for (int64_t i = 0; i < s.c_rows; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const uint64_t idx = s.a_trans ? uint64_t(p) * s.org_m + s.c_row0 + i : uint64_t(s.c_row0 + i) * s.org_ka + p;
      a[i * k + p] = s.load_a(s.a, idx);
    }
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < s.c_cols; ++j) {
      const uint64_t idx = s.b_trans ? uint64_t(s.c_col0 + j) * s.org_kb + p : uint64_t(p) * s.org_n + s.c_col0 + j;
      b[p * s.c_cols + j] = s.load_b(s.b, idx);
    }
  s.c.assign(s.c_rows * s.c_cols, 0.0f);
  for (int64_t i = 0; i < s.c_rows; ++i) {
    float* row = &s.c[i * s.c_cols];
    for (int64_t p = 0; p < k; ++p) {
      const float x = a[i * k + p];
      const float* brow = &b[p * s.c_cols];
      for (int64_t j = 0; j < s.c_cols; ++j) row[j] += x * brow[j];
    }
  }
  return true;
}

void MatmulStoreC(MatmulState& s, void* c, uint64_t c_elems, uint8_t enAtomic) {
  if (s.block < 0) Fail("GetTensorC without a block from Iterate");
  if (enAtomic > 1) Fail("enAtomic " + Num(enAtomic) + " is not modelled (0: write, 1: add)");
  if (enAtomic && s.c_bytes != 4) Fail("an atomic add into a half / bfloat16_t C is not modelled (use an fp32 C)");
  const uint64_t ldc = s.org_n;
  const uint64_t last = (s.c_row0 + s.c_rows - 1) * ldc + s.c_col0 + s.c_cols;
  if (last > c_elems)
    Fail("C block ends at element " + Num(last) + ", beyond its GlobalTensor's " + Num(c_elems));
  // The fixpipe stores what the cube computed from MTE2's loads: ordered after them.
  PipeMerge(kPipeFix, PipeView(kPipeMte2));
  BlockContext& ctx = Ctx();
  auto* bytes = static_cast<uint8_t*>(c);
  ctx.atomic_store = enAtomic != 0;
  for (int64_t i = 0; i < s.c_rows; ++i) {
    uint8_t* out = bytes + ((s.c_row0 + i) * ldc + s.c_col0) * s.c_bytes;
    CheckGm(out, s.c_cols * s.c_bytes, "Matmul C store");
    ctx.counters.gm_write_bytes += GmSectorBytes(out, s.c_cols * s.c_bytes);
  }
  ctx.atomic_store = false;
  if (enAtomic) {
    // The fixpipe's atomic add: applied later, in an order the launch's schedule picks
    // among the adds nothing orders (rule F, AtomicRecord).
    AtomicRecord a;
    a.thread = ctx.thread;
    a.fix_count = ctx.pipes.seen[kPipeFix][kPipeFix];
    a.clock = ctx.clock;
    a.dst = static_cast<float*>(c) + s.c_row0 * ldc + s.c_col0;
    a.ldc = ldc;
    a.rows = s.c_rows;
    a.cols = s.c_cols;
    a.values = s.c;
    a.lo = reinterpret_cast<const uint8_t*>(a.dst);
    a.hi = reinterpret_cast<const uint8_t*>(a.dst + (s.c_rows - 1) * ldc + s.c_cols);
    DeferAtomicAdd(std::move(a));
    return;
  }
  for (int64_t i = 0; i < s.c_rows; ++i)
    for (int64_t j = 0; j < s.c_cols; ++j)
      s.store_c(c, (s.c_row0 + i) * ldc + s.c_col0 + j, s.c[i * s.c_cols + j]);
}

}  // namespace sim
