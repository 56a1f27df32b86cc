// fused_linear_cross_entropy_loss_grad as one MIX kernel (AIC:AIV = 1:2), SPEC §1:
//
//   P = softmax                                           (high-performance mode), or
//   P = exp(x·wᵀ − logits_max[i]) / sum_exp_logits[i]     (memory-saving mode)
//   G = cast((P − onehot(masked_target)) · grad[i])       rows with target_mask set: no one-hot
//   input_grad = G · w,  weight_grad = Gᵀ · x             fp32 accumulation, cast once
//
// The order of the work is op_kernel/…_schedule.h (shared with the cost model), the G
// computation the vector stage of …_g_stage.h, which also takes the loss options of SPEC §7
// (tiling key bit 8: alpha, beta, gamma for grad, bias, class weights, logit scale and
// soft-cap; the cube side is the same for them, the plain variants compile none of it). Memory-saving mode, window by window:
//   AIC   logits block = x_b · w_bᵀ (Matmul, fp32) -> ring slot k % 2                 ─ LOGITS(slot) ─►
//   AIV0/AIV1 (half the rows each): G = the vector stage -> the window's G buffer     ─ SLOT_FREE(slot) ─►
//   all AIVs meet (mode 0) once a window's G is written                              ─ G_READY ─►
//   AIC   the window's output tiles, output-stationary over its K:
//           acc_x[tile] (+)= G_win · w_win,  acc_w[tile] (+)= G_winᵀ · x_win  (Matmul, fp32; the
//           first window along K writes, the later ones add; one writer per tile and step)
//   all AICs meet (mode 0) after each step                                            ─ DONE ─► (last)
//   AIV   cast the accumulators to input_grad / weight_grad.
// A step is one window's logits and the previous window's tiles (the cube keeps going while
// the vector cores make G). High-performance mode: every AIV writes G over its softmax rows
// (each row into the first half of its own bytes), all AIVs meet (mode 0) ─ G_READY ─►,
// then the AICs compute input_grad = G · w and weight_grad = Gᵀ · x tile by tile over all
// of K, written once in the input dtype (the fixpipe rounds). No accumulator, no atomics:
// every output element is summed in one fixed order, so the result is the same for any
// number of cores, run after run.
//
// The AIC drives the cube itself: it names MatmulImpl and calls Init(&tiling, &pipe) in its
// own branch, as CANN's own FLCE kernel does (ops-nn v9.0.0 mem_friendly.h, the AIC branch).
// CANN's kernel does not define ASCENDC_CUBE_ONLY (its …_config.h includes lib/matmul_intf.h
// without it), and the macro changes nothing this file uses: in asc-devkit's matmul_intf.h
// and kfc_register_obj.h it only chooses what the `Matmul` alias and REGIST_MATMUL_OBJ
// mean. We define it so that, should either ever be used here, they mean the AIC's own
// objects: without it REGIST_MATMUL_OBJ in a MIX kernel turns the AIC into a KFC server
// that only runs Matmul calls sent by the AIVs, and the cube-side code below would never
// run (every core would wait forever; the simulator reports that form as a hang).
#define ASCENDC_CUBE_ONLY
#include <type_traits>

#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "fused_linear_cross_entropy_loss_grad_tiling_data.h"
#include "fused_linear_cross_entropy_loss_grad_schedule.h"
#include "fused_linear_cross_entropy_loss_grad_g_stage.h"

using namespace AscendC;
using namespace flce;

namespace {

constexpr int32_t BUFFER_NUM = 2;
// Cross-core flag ids (A2/A3: 0..10, one counter per id and core whatever the mode).
constexpr uint16_t FLAG_LOGITS = 0;     // +slot, mode 2 AIC -> AIV: a logits block is in ring slot `slot`
constexpr uint16_t FLAG_DONE = 2;       // mode 2 AIC -> AIV: every tile of every core has landed
constexpr uint16_t FLAG_SLOT_FREE = 3;  // +slot, mode 2 AIV -> AIC: ring slot `slot` has been read
constexpr uint16_t FLAG_G_READY = 5;    // mode 2 AIV -> AIC: every vector core has written the window's G
constexpr uint16_t FLAG_G_WRITTEN = 6;  // mode 0, all AIVs: this core's G of the window (or pass) is written
constexpr uint16_t FLAG_STEP_DONE = 7;  // mode 0, all AICs: this core's tiles of the step have landed

// ---- the cube core ------------------------------------------------------------------

// The Matmul library copies each L1 fill GM -> L1 with one ND->NZ DataCopy whose source row
// pitch (srcDValue, the operand's org row length) is a uint16_t on A2, range [1, 65535]
// (asc-devkit kernel_struct_data_copy.h:300; data_copy_wrapper_nd.h:85): a longer pitch
// would be truncated and the fill read the wrong rows. High-performance mode's A is G over
// the softmax, row pitch 2V, past it from V = 32768: its GEMMs take intrinsicsCheck, with
// which the library copies such a fill row by row (data_copy_wrapper_nd.h:105-113).
// Memory-saving mode's pitches are H (x, w; the TilingFunc refuses H > 65535) and a window's
// columns (at most 2048), so its objects keep CFG_NORM, one copy per fill.
constexpr MatmulConfig kFlceLongRowsCfg = GetNormalConfig(true);

template <typename T, bool kMemorySaving>
class CubeSide {
  using AType = MatmulType<TPosition::GM, CubeFormat::ND, T, true>;
  using BType = MatmulType<TPosition::GM, CubeFormat::ND, T, true>;
  using LogitsType = MatmulType<TPosition::GM, CubeFormat::ND, float>;
  // The backward GEMMs' C: fp32 accumulators (memory-saving), the outputs themselves (high-performance).
  using GradT = typename std::conditional<kMemorySaving, float, T>::type;
  using GradType = MatmulType<TPosition::GM, CubeFormat::ND, GradT>;
  using GradMatmul = typename std::conditional<kMemorySaving, MatmulImpl<AType, BType, GradType, GradType, CFG_NORM>,
                                               MatmulImpl<AType, BType, GradType, GradType, kFlceLongRowsCfg>>::type;

 public:
  __aicore__ inline explicit CubeSide(const FusedLinearCrossEntropyLossGradTilingData& tiling) : t_(tiling) {}

  __aicore__ inline void Run(GM_ADDR input, GM_ADDR weight, GM_ADDR softmax, GM_ADDR inputGrad, GM_ADDR weightGrad,
                             GM_ADDR user) {
    // The host's tilings (CANN's MultiCoreMatmulTiling) as they are: the AIC's own Matmuls.
    // All three start at the same L1 and L0C address of pipe_ (kernel_tpipe_base.h), so
    // each one's End() comes before the next one's IterateAll.
    if constexpr (kMemorySaving) logitsMm_.Init(&t_.logitsMm, &pipe_);
    inputGradMm_.Init(&t_.inputGradMm, &pipe_);
    weightGradMm_.Init(&t_.weightGradMm, &pipe_);
    xGm_.SetGlobalBuffer((__gm__ T*)input, t_.bt * t_.h);
    wGm_.SetGlobalBuffer((__gm__ T*)weight, t_.v * t_.h);
    if constexpr (kMemorySaving) {
      logitsGm_.SetGlobalBuffer((__gm__ float*)(user + GetBlockIdx() * t_.ringBytes), 2 * t_.logitsSlotBytes / sizeof(float));
      for (int b = 0; b < 2; ++b)
        gWindowGm_[b].SetGlobalBuffer((__gm__ T*)(user + t_.gOffset + b * t_.gWindowBytes), t_.gWindowBytes / sizeof(T));
      cGm_.SetGlobalBuffer((__gm__ GradT*)(user + t_.accOffset), (t_.bt + t_.v) * t_.h);  // acc_x, then acc_w
      RunMemorySaving();
    } else {
      gWindowGm_[0].SetGlobalBuffer((__gm__ T*)softmax, t_.bt * 2 * t_.v);  // G over the softmax: row pitch 2V
      cGm_.SetGlobalBuffer((__gm__ GradT*)inputGrad, t_.bt * t_.h);
      weightGradGm_.SetGlobalBuffer((__gm__ GradT*)weightGrad, t_.v * t_.h);
      RunHighPerformance();
    }
  }

 private:
  __aicore__ inline void RunMemorySaving() {
    const uint64_t core = GetBlockIdx(), cores = GetBlockNum();
    uint64_t tasks = 0;  // logits blocks this core has computed (ring slot = count % 2)
    for (uint64_t s = 0; s < StepCount(t_); ++s) {
      uint64_t q = 0;
      for (uint64_t j = 0; CoreTask(t_, s, core, cores, j, q); ++j) Logits(TaskOf(t_, WindowAt(t_, s), q), tasks++);
      if (s == 0) continue;
      CrossCoreWaitFlag(FLAG_G_READY);  // the previous window's G, from every vector core
      for (uint64_t j = 0; CoreTile(t_, s, core, cores, j, q); ++j) WindowTile(TileAt(t_, s, q), WindowAt(t_, s - 1));
      // Every core's tiles of this step have landed before any core's of the next: the next
      // window adds into the same accumulator tiles, and reuses this G buffer.
      CrossCoreSetFlag<0, PIPE_FIX>(FLAG_STEP_DONE);
      CrossCoreWaitFlag(FLAG_STEP_DONE);
    }
    for (uint64_t k = tasks >= 2 ? tasks - 2 : 0; k < tasks; ++k) CrossCoreWaitFlag(FLAG_SLOT_FREE + k % 2);
    CrossCoreSetFlag<2, PIPE_FIX>(FLAG_DONE);
  }

  __aicore__ inline void RunHighPerformance() {
    const uint64_t core = GetBlockIdx(), cores = GetBlockNum();
    CrossCoreWaitFlag(FLAG_G_READY);  // every vector core has written G over its softmax rows
    uint64_t q = 0;
    for (uint64_t j = 0; CoreTile(t_, 0, core, cores, j, q); ++j) OutputTile(TileAt(t_, 0, q));
  }

  __aicore__ inline uint64_t SlotElems() const { return uint64_t(t_.rowBlock) * t_.colBlock; }

  // logits[rows, cols] = x[row0.., :] · w[col0.., :]ᵀ, fp32, into ring slot k % 2 (row pitch colBlock).
  __aicore__ inline void Logits(const FlceTask& k, uint64_t count) {
    const uint64_t slot = count % 2;
    if (count >= 2) CrossCoreWaitFlag(FLAG_SLOT_FREE + slot);  // the AIVs have read the block two back
    logitsMm_.SetOrgShape(t_.rowBlock, t_.colBlock, t_.h, t_.h);
    logitsMm_.SetSingleShape(k.rows, k.cols, t_.h);
    logitsMm_.SetTensorA(xGm_[k.row0 * t_.h]);
    logitsMm_.SetTensorB(wGm_[k.col0 * t_.h], true);
    logitsMm_.IterateAll(logitsGm_[slot * SlotElems()]);
    logitsMm_.End();
    CrossCoreSetFlag<2, PIPE_FIX>(FLAG_LOGITS + slot);
  }

  // A memory-saving tile: window w's part of input_grad (gemm 0: G_win rows · w rows of the
  // window's vocabulary) or of weight_grad (gemm 1: G_win columnsᵀ · x rows of the window),
  // written into or added to the fp32 accumulators. G_win: row pitch windowColBlocks x colBlock.
  __aicore__ inline void WindowTile(const FlceTile& tile, const FlceWindow& w) {
    const GlobalTensor<T>& g = gWindowGm_[w.index % 2];
    const uint64_t pitch = uint64_t(t_.windowColBlocks) * t_.colBlock;
    const uint8_t add = tile.add ? 1 : 0;
    if (tile.gemm == 0) {
      inputGradMm_.SetOrgShape(tile.rows, t_.h, pitch, tile.k);
      inputGradMm_.SetSingleShape(tile.rows, tile.cols, tile.k);
      inputGradMm_.SetTensorA(g[(tile.row0 - w.row0) * pitch]);
      inputGradMm_.SetTensorB(wGm_[tile.k0 * t_.h + tile.col0]);
      inputGradMm_.IterateAll(cGm_[tile.row0 * t_.h + tile.col0], add);
      inputGradMm_.End();
    } else {
      weightGradMm_.SetOrgShape(pitch, t_.h, tile.k, tile.k);  // A = G_winᵀ: its pitch is orgM
      weightGradMm_.SetSingleShape(tile.rows, tile.cols, tile.k);
      weightGradMm_.SetTensorA(g[tile.row0 - w.col0], true);
      weightGradMm_.SetTensorB(xGm_[tile.k0 * t_.h + tile.col0]);
      weightGradMm_.IterateAll(cGm_[(t_.bt + tile.row0) * t_.h + tile.col0], add);
      weightGradMm_.End();
    }
  }

  // A high-performance tile over all of K: input_grad (gemm 0) = G rows · w, weight_grad
  // (gemm 1) = G columnsᵀ · x; G is over the softmax with row pitch 2V.
  __aicore__ inline void OutputTile(const FlceTile& tile) {
    const GlobalTensor<T>& g = gWindowGm_[0];
    const uint64_t pitch = 2 * t_.v;
    if (tile.gemm == 0) {
      inputGradMm_.SetOrgShape(tile.rows, t_.h, pitch, t_.v);
      inputGradMm_.SetSingleShape(tile.rows, tile.cols, tile.k);
      inputGradMm_.SetTensorA(g[tile.row0 * pitch]);
      inputGradMm_.SetTensorB(wGm_[tile.col0]);
      inputGradMm_.IterateAll(cGm_[tile.row0 * t_.h + tile.col0]);
      inputGradMm_.End();
    } else {
      weightGradMm_.SetOrgShape(pitch, t_.h, t_.bt, t_.bt);  // A = Gᵀ: its pitch is orgM
      weightGradMm_.SetSingleShape(tile.rows, tile.cols, tile.k);
      weightGradMm_.SetTensorA(g[tile.row0], true);
      weightGradMm_.SetTensorB(xGm_[tile.col0]);
      weightGradMm_.IterateAll(weightGradGm_[tile.row0 * t_.h + tile.col0]);
      weightGradMm_.End();
    }
  }

  const FusedLinearCrossEntropyLossGradTilingData& t_;
  TPipe pipe_;
  MatmulImpl<AType, BType, LogitsType> logitsMm_;
  GradMatmul inputGradMm_, weightGradMm_;
  GlobalTensor<T> xGm_, wGm_, gWindowGm_[2];
  GlobalTensor<float> logitsGm_;
  // The backward tiles' C: the fp32 accumulators [BT + V, H] (memory-saving), or input_grad
  // and weight_grad themselves (high-performance).
  GlobalTensor<GradT> cGm_, weightGradGm_;
};

// ---- the vector cores ---------------------------------------------------------------

template <typename T, bool kMemorySaving, typename TTarget, bool kOptions>
class VectorSide {
 public:
  __aicore__ inline explicit VectorSide(const FusedLinearCrossEntropyLossGradTilingData& tiling) : t_(tiling) {}

  __aicore__ inline void Run(GM_ADDR grad, GM_ADDR targetMask, GM_ADDR maskedTarget, GM_ADDR logitsMax,
                             GM_ADDR sumExpLogits, GM_ADDR softmax, const GOptions& options, GM_ADDR inputGrad,
                             GM_ADDR weightGrad, GM_ADDR user) {
    g_.Init(grad, targetMask, maskedTarget, logitsMax, sumExpLogits, t_.bt, t_.v);
    g_.InitOptions(pipe_, options, t_.bt, kMemorySaving ? t_.colBlock : t_.chunkCols);
    reportGm_.SetGlobalBuffer((__gm__ int64_t*)(user + t_.reportOffset), 2 * GetBlockNum());
    pipe_.InitBuffer(reportBuf_, 32);
    if constexpr (kMemorySaving) {
      InitMemorySaving(inputGrad, weightGrad, user);
      RunMemorySaving();
    } else {
      InitHighPerformance(softmax);
      RunHighPerformance();
    }
    Report();
  }

 private:
  __aicore__ inline void InitMemorySaving(GM_ADDR inputGrad, GM_ADDR weightGrad, GM_ADDR user) {
    const uint64_t aic = GetBlockIdx() / GetTaskRatio();
    logitsGm_.SetGlobalBuffer((__gm__ float*)(user + aic * t_.ringBytes), 2 * t_.logitsSlotBytes / sizeof(float));
    for (int b = 0; b < 2; ++b)
      gWindowGm_[b].SetGlobalBuffer((__gm__ T*)(user + t_.gOffset + b * t_.gWindowBytes), t_.gWindowBytes / sizeof(T));
    accGm_.SetGlobalBuffer((__gm__ float*)(user + t_.accOffset), (t_.bt + t_.v) * t_.h);
    inputGradGm_.SetGlobalBuffer((__gm__ T*)inputGrad, t_.bt * t_.h);
    weightGradGm_.SetGlobalBuffer((__gm__ T*)weightGrad, t_.v * t_.h);
    pipe_.InitBuffer(pQue_, BUFFER_NUM, t_.gTileRows * t_.colBlock * sizeof(float));
    pipe_.InitBuffer(gQue_, BUFFER_NUM, t_.gTileRows * t_.colBlock * sizeof(T));
    pipe_.InitBuffer(accInQue_, BUFFER_NUM, t_.castRows * FloatPitch(t_.castCols) * sizeof(float));
    pipe_.InitBuffer(accOutQue_, BUFFER_NUM, t_.castRows * HalfPitch(t_.castCols) * sizeof(T));
  }

  __aicore__ inline void InitHighPerformance(GM_ADDR softmax) {
    softmaxGm_.SetGlobalBuffer((__gm__ float*)softmax, t_.bt * t_.v);
    gWindowGm_[0].SetGlobalBuffer((__gm__ T*)softmax, t_.bt * 2 * t_.v);  // G: row i at element 2V·i
    pipe_.InitBuffer(pQue_, BUFFER_NUM, t_.chunkCols * sizeof(float));
    pipe_.InitBuffer(gQue_, BUFFER_NUM, t_.chunkCols * sizeof(T));
  }

  // UB row pitches (elements) of `cols` fp32 or half values: whole 32-byte blocks.
  __aicore__ inline static uint32_t FloatPitch(uint32_t cols) { return (cols + 7) / 8 * 8; }
  __aicore__ inline static uint32_t HalfPitch(uint32_t cols) { return (cols + 15) / 16 * 16; }

  __aicore__ inline void RunMemorySaving() {
    const uint64_t aic = GetBlockIdx() / GetTaskRatio(), cores = GetBlockNum();
    uint64_t count = 0;  // logits blocks of this AI core so far (ring slot = count % 2)
    for (uint64_t s = 0; s < t_.windows; ++s) {
      const FlceWindow w = WindowAt(t_, s);
      uint64_t q = 0;
      for (uint64_t j = 0; CoreTask(t_, s, aic, cores, j, q); ++j) {  // its AIC's logits tasks, in order
        const uint64_t slot = count++ % 2;
        CrossCoreWaitFlag(FLAG_LOGITS + slot);
        MakeWindowG(TaskOf(t_, w, q), w, slot);
        CrossCoreSetFlag<2, PIPE_MTE2>(FLAG_SLOT_FREE + slot);  // its reads of the slot are done
      }
      WindowGWritten();
    }
    CrossCoreWaitFlag(FLAG_DONE);  // every AIC's every tile has landed
    CastAccumulators();
  }

  __aicore__ inline void RunHighPerformance() {
    const uint64_t me = GetBlockIdx(), all = GetBlockNum() * GetTaskRatio();
    const uint64_t row0 = t_.bt * me / all, rowEnd = t_.bt * (me + 1) / all;
    // Chunk by chunk, and within a chunk this core's rows: a chunk's class weights are
    // loaded once for all of them (V > chunkCols gives a row several chunks; row by row,
    // each row would reload all V of them, as many bytes as its softmax).
    for (uint64_t c0 = 0; c0 < t_.v && row0 < rowEnd; c0 += t_.chunkCols) {
      const uint32_t cols = static_cast<uint32_t>(t_.v - c0 < t_.chunkCols ? t_.v - c0 : t_.chunkCols);
      g_.LoadColumns(c0, cols);  // options: this chunk's class weights
      for (uint64_t row = row0; row < rowEnd; ++row) {
        // Each row's target is checked once, in its first chunk.
        const GRowScalars r = g_.Row(row, c0 == 0);
        // In place: G's chunk goes to bytes [4V·row + 2·c0, 4V·row + 2·(c0 + cols)), all of
        // them softmax columns below c0 + cols of this row, which are read by then.
        LocalTensor<float> p = pQue_.AllocTensor<float>();
        DataCopyPadExtParams<float> pad(false, 0, 0, 0.0f);
        DataCopyPad(p, softmaxGm_[row * t_.v + c0], DataCopyExtParams(1, cols * sizeof(float), 0, 0, 0), pad);
        pQue_.EnQue(p);
        p = pQue_.DeQue<float>();
        LocalTensor<T> g = gQue_.AllocTensor<T>();
        g_.Apply(p, g, cols, c0, r);
        gQue_.EnQue(g);
        pQue_.FreeTensor(p);
        g = gQue_.DeQue<T>();
        DataCopyPad(gWindowGm_[0][row * 2 * t_.v + c0], g, DataCopyExtParams(1, cols * sizeof(T), 0, 0, 0));
        gQue_.FreeTensor(g);
      }
    }
    WindowGWritten();
  }

  // This core's G of the window (or of the pass) is written: once every vector core's is,
  // each tells its AIC.
  __aicore__ inline void WindowGWritten() {
    CrossCoreSetFlag<0, PIPE_MTE3>(FLAG_G_WRITTEN);
    CrossCoreWaitFlag(FLAG_G_WRITTEN);
    CrossCoreSetFlag<2, PIPE_MTE3>(FLAG_G_READY);
  }

  // G for this AIV's half of the task's rows, from ring slot `slot` into the window's G
  // buffer (row pitch windowColBlocks x colBlock).
  __aicore__ inline void MakeWindowG(const FlceTask& k, const FlceWindow& w, uint64_t slot) {
    const uint32_t half = (k.rows + 1) / 2;
    const uint32_t mine0 = GetSubBlockIdx() == 0 ? 0 : half;
    const uint32_t mineEnd = GetSubBlockIdx() == 0 ? half : k.rows;
    const uint64_t pitch = uint64_t(t_.windowColBlocks) * t_.colBlock;
    const GlobalTensor<T> out = gWindowGm_[w.index % 2][(k.row0 - w.row0) * pitch + (k.col0 - w.col0)];
    for (uint32_t r = mine0; r < mineEnd; r += t_.gTileRows) {
      const uint32_t rows = mineEnd - r < t_.gTileRows ? mineEnd - r : t_.gTileRows;
      // UB rows are colBlock elements apart (a 32-byte multiple): skip the blocks past `cols`.
      LocalTensor<float> p = pQue_.AllocTensor<float>();
      DataCopyPadExtParams<float> pad(false, 0, 0, 0.0f);
      DataCopyExtParams in(static_cast<uint16_t>(rows), k.cols * sizeof(float), (t_.colBlock - k.cols) * sizeof(float),
                           (t_.colBlock - FloatPitch(k.cols)) / 8, 0);
      DataCopyPad(p, logitsGm_[slot * uint64_t(t_.rowBlock) * t_.colBlock + uint64_t(r) * t_.colBlock], in, pad);
      pQue_.EnQue(p);
      p = pQue_.DeQue<float>();
      LocalTensor<T> g = gQue_.AllocTensor<T>();
      g_.LoadColumns(k.col0, k.cols);  // options: the task's bias and class weights
      for (uint32_t i = 0; i < rows; ++i) {
        // Each row's target is checked once: in its task of vocabulary block 0.
        const GRowScalars scalars = g_.Row(k.row0 + r + i, k.col0 == 0);
        g_.Apply(p[i * t_.colBlock], g[i * t_.colBlock], k.cols, k.col0, scalars);
      }
      gQue_.EnQue(g);
      pQue_.FreeTensor(p);
      g = gQue_.DeQue<T>();
      DataCopyExtParams outParams(static_cast<uint16_t>(rows), k.cols * sizeof(T), (t_.colBlock - HalfPitch(k.cols)) / 16,
                                  static_cast<uint32_t>((pitch - k.cols) * sizeof(T)), 0);
      DataCopyPad(out[uint64_t(r) * pitch], g, outParams);
      gQue_.FreeTensor(g);
    }
  }

  // This AIV's share of the rows [0, BT + V) of the [BT + V, H] accumulator matrix.
  __aicore__ inline void MyAccRows(uint64_t& begin, uint64_t& end) const {
    const uint64_t all = t_.bt + t_.v, cores = GetBlockNum() * GetTaskRatio(), me = GetBlockIdx();
    begin = all * me / cores;
    end = all * (me + 1) / cores;
  }

  // input_grad / weight_grad = cast(accumulator rows), round to nearest even.
  __aicore__ inline void CastAccumulators() {
    uint64_t begin, end;
    MyAccRows(begin, end);
    for (uint64_t r = begin; r < end;) {
      // A tile stays on one side of the input_grad / weight_grad boundary.
      const uint64_t limit = r < t_.bt ? (end < t_.bt ? end : t_.bt) : end;
      const uint32_t rows = static_cast<uint32_t>(limit - r < t_.castRows ? limit - r : t_.castRows);
      for (uint64_t c = 0; c < t_.h; c += t_.castCols) {
        const uint32_t cols = static_cast<uint32_t>(t_.h - c < t_.castCols ? t_.h - c : t_.castCols);
        CastTile(r, c, rows, cols);
      }
      r += rows;
    }
  }

  __aicore__ inline void CastTile(uint64_t r, uint64_t c, uint32_t rows, uint32_t cols) {
    const uint32_t fp = FloatPitch(t_.castCols), hp = HalfPitch(t_.castCols);
    LocalTensor<float> in = accInQue_.AllocTensor<float>();
    DataCopyPadExtParams<float> pad(false, 0, 0, 0.0f);
    DataCopyExtParams inParams(static_cast<uint16_t>(rows), cols * sizeof(float),
                               static_cast<uint32_t>((t_.h - cols) * sizeof(float)), (fp - FloatPitch(cols)) / 8, 0);
    DataCopyPad(in, accGm_[r * t_.h + c], inParams, pad);
    accInQue_.EnQue(in);
    in = accInQue_.DeQue<float>();
    LocalTensor<T> out = accOutQue_.AllocTensor<T>();
    for (uint32_t i = 0; i < rows; ++i) Cast(out[i * hp], in[i * fp], RoundMode::CAST_RINT, cols);
    accOutQue_.EnQue(out);
    accInQue_.FreeTensor(in);
    out = accOutQue_.DeQue<T>();
    DataCopyExtParams outParams(static_cast<uint16_t>(rows), cols * sizeof(T), (hp - HalfPitch(cols)) / 16,
                                static_cast<uint32_t>((t_.h - cols) * sizeof(T)), 0);
    if (r < t_.bt) {
      DataCopyPad(inputGradGm_[r * t_.h + c], out, outParams);
    } else {
      DataCopyPad(weightGradGm_[(r - t_.bt) * t_.h + c], out, outParams);
    }
    accOutQue_.FreeTensor(out);
  }

  // The first row with an unmasked target outside [0, V) this core saw, or −1, for the host.
  __aicore__ inline void Report() {
    LocalTensor<int64_t> slot = reportBuf_.Get<int64_t>();
    slot.SetValue(0, g_.FirstBadRow());
    const TEventID sToMte3 = pipe_.FetchEventID(HardEvent::S_MTE3);
    SetFlag<HardEvent::S_MTE3>(sToMte3);
    WaitFlag<HardEvent::S_MTE3>(sToMte3);
    DataCopyPad(reportGm_[GetBlockIdx()], slot, DataCopyExtParams(1, sizeof(int64_t), 0, 0, 0));
  }

  const FusedLinearCrossEntropyLossGradTilingData& t_;
  TPipe pipe_;
  GStage<T, TTarget, kMemorySaving, kOptions> g_;
  TQue<QuePosition::VECIN, BUFFER_NUM> pQue_, accInQue_;
  TQue<QuePosition::VECOUT, BUFFER_NUM> gQue_, accOutQue_;
  TBuf<TPosition::VECCALC> reportBuf_;
  GlobalTensor<float> softmaxGm_, logitsGm_, accGm_;
  GlobalTensor<T> gWindowGm_[2], inputGradGm_, weightGradGm_;
  GlobalTensor<int64_t> reportGm_;
};

template <bool kMemorySaving, typename T, typename TTarget, bool kOptions>
__aicore__ inline void Run(const FusedLinearCrossEntropyLossGradTilingData& tiling, GM_ADDR grad, GM_ADDR input,
                           GM_ADDR weight, GM_ADDR targetMask, GM_ADDR maskedTarget, GM_ADDR logitsMax,
                           GM_ADDR sumExpLogits, GM_ADDR softmax, const GOptions& options, GM_ADDR inputGrad,
                           GM_ADDR weightGrad, GM_ADDR user) {
  if ASCEND_IS_AIC {
    CubeSide<T, kMemorySaving> cube(tiling);
    cube.Run(input, weight, softmax, inputGrad, weightGrad, user);
  }
  if ASCEND_IS_AIV {
    VectorSide<T, kMemorySaving, TTarget, kOptions> vec(tiling);
    vec.Run(grad, targetMask, maskedTarget, logitsMax, sumExpLogits, softmax, options, inputGrad, weightGrad, user);
  }
}

}  // namespace

// Tiling key = mode (0 memory-saving, 1 high-performance) + 2 * (bfloat16) +
// 4 * (int64 masked_target) + 8 * (loss options); target_mask is always the bit-packed
// uint8 the op takes.
#define FLCE_CASE(key, ms, T, TT, OPT)                                                                              \
  if (TILING_KEY_IS(key)) {                                                                                       \
    Run<ms, T, TT, OPT>(tilingData, grad, input, weight, targetMask, maskedTarget, logitsMax, sumExpLogits,       \
                        softmax, options, inputGrad, weightGrad, user);                                           \
    return;                                                                                                       \
  }

// The CANN aclnn argument order: grad, input, weight, target_mask, masked_target,
// logits_max, sum_exp_logits, softmax, then the options' bias, class_weight, alpha, beta,
// gamma (absent optional tensors are null), the two outputs, workspace, tiling.
extern "C" __global__ __aicore__ void ascend_ops_fused_linear_cross_entropy_loss_grad(
    GM_ADDR grad, GM_ADDR input, GM_ADDR weight, GM_ADDR targetMask, GM_ADDR maskedTarget, GM_ADDR logitsMax,
    GM_ADDR sumExpLogits, GM_ADDR softmax, GM_ADDR bias, GM_ADDR classWeight, GM_ADDR alpha, GM_ADDR beta,
    GM_ADDR gamma, GM_ADDR inputGrad, GM_ADDR weightGrad, GM_ADDR workspace, GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
  REGISTER_TILING_DEFAULT(FusedLinearCrossEntropyLossGradTilingData);
  GET_TILING_DATA_WITH_STRUCT(FusedLinearCrossEntropyLossGradTilingData, tilingData, tiling);
  // The framework sets the system workspace (the Matmul library's, unused by the AIC's own
  // MatmulImpl objects); ours follows it. On the device GetUserWorkspace returns the
  // workspace + RESERVED_WORKSPACE (16 MiB) whatever its argument, which is what the
  // TilingFunc reserves in front (GetLibApiWorkSpaceSize()).
  GM_ADDR user = GetUserWorkspace(workspace);
  const GOptions options{bias, classWeight, alpha, beta, gamma, tilingData.options, tilingData.logitScale,
                         tilingData.softcap};
  FLCE_CASE(0, true, half, int32_t, false)
  FLCE_CASE(1, false, half, int32_t, false)
  FLCE_CASE(2, true, bfloat16_t, int32_t, false)
  FLCE_CASE(3, false, bfloat16_t, int32_t, false)
  FLCE_CASE(4, true, half, int64_t, false)
  FLCE_CASE(5, false, half, int64_t, false)
  FLCE_CASE(6, true, bfloat16_t, int64_t, false)
  FLCE_CASE(7, false, bfloat16_t, int64_t, false)
  FLCE_CASE(8, true, half, int32_t, true)
  FLCE_CASE(9, false, half, int32_t, true)
  FLCE_CASE(10, true, bfloat16_t, int32_t, true)
  FLCE_CASE(11, false, bfloat16_t, int32_t, true)
  FLCE_CASE(12, true, half, int64_t, true)
  FLCE_CASE(13, false, half, int64_t, true)
  FLCE_CASE(14, true, bfloat16_t, int64_t, true)
  FLCE_CASE(15, false, bfloat16_t, int64_t, true)
}
