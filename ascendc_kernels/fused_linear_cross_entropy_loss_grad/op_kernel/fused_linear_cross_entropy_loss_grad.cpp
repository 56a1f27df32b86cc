// fused_linear_cross_entropy_loss_grad as one MIX kernel (AIC:AIV = 1:2), SPEC §1:
//
//   P = softmax                                           (high-performance mode), or
//   P = exp(x·wᵀ − logits_max[i]) / sum_exp_logits[i]     (memory-saving mode)
//   G = cast((P − onehot(masked_target)) · grad[i])       rows with target_mask set: no one-hot
//   input_grad = G · w,  weight_grad = Gᵀ · x             fp32 accumulation, cast once
//
// BT x V is cut into tasks of rowBlock x colBlock (tiling), dealt round-robin to the cube
// cores. Per task, on one AI core:
//   AIC  [memory-saving] logits block = x_b · w_bᵀ (Matmul, fp32) -> ring slot s  ─ LOGITS(s) ─►
//   AIV0/AIV1 (half the rows each): G block = cast((P − onehot) · grad) -> ring slot s  ─ G(s) ─►
//   AIC  acc_x[rows] += G · w_b,  acc_w[cols] += Gᵀ · x_b  (Matmul, fp32 atomic add in GM)
// The ring has two slots, so the cube computes task j+1's logits while the vector cores
// turn task j into G. The AIVs zero the accumulators first (SyncAll, then INIT to their
// AIC) and cast them to the outputs last (after DONE from their AIC and a SyncAll).
//
// The AIC drives the cube itself: it names MatmulImpl and calls Init(&tiling, &pipe) in its
// own branch, as CANN's own FLCE kernel does (ops-nn v9.0.0 mem_friendly.h, the AIC branch).
// CANN's kernel does not define ASCENDC_CUBE_ONLY (its _config.h includes lib/matmul_intf.h
// without it), and the macro changes nothing this file uses: in asc-devkit's matmul_intf.h
// and kfc_register_obj.h it only chooses what the `Matmul` alias and REGIST_MATMUL_OBJ
// mean. We define it so that, should either ever be used here, they mean the AIC's own
// objects: without it REGIST_MATMUL_OBJ in a MIX kernel turns the AIC into a KFC server
// that only runs Matmul calls sent by the AIVs, and the cube-side code below would never
// run (every core would wait forever; the simulator reports that form as a hang).
#define ASCENDC_CUBE_ONLY
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "fused_linear_cross_entropy_loss_grad_tiling_data.h"

using namespace AscendC;

namespace {

constexpr int32_t BUFFER_NUM = 2;
// Cross-core flag ids (mode 2, within one AI core).
constexpr uint16_t FLAG_LOGITS = 0;  // +slot: AIC -> AIV, a logits block is in the ring
constexpr uint16_t FLAG_G = 2;       // +slot: AIV -> AIC, a G block is in the ring
constexpr uint16_t FLAG_INIT = 4;    // AIV -> AIC: the accumulators are zero (all cores)
constexpr uint16_t FLAG_DONE = 5;    // AIC -> AIV: this cube core's last atomic add landed
constexpr uint16_t FLAG_FREE = 6;    // +slot, high-performance mode: AIC -> AIV, G slot read
                                     // (memory-saving mode: LOGITS(s) says the same)

// A task's place in BT x V.
struct Task {
  uint64_t row0, col0;
  uint32_t rows, cols;
};

__aicore__ inline Task TaskAt(const FusedLinearCrossEntropyLossGradTilingData& t, uint64_t task) {
  Task k;
  k.row0 = (task / t.colBlocks) * t.rowBlock;
  k.col0 = (task % t.colBlocks) * t.colBlock;
  k.rows = static_cast<uint32_t>(t.bt - k.row0 < t.rowBlock ? t.bt - k.row0 : t.rowBlock);
  k.cols = static_cast<uint32_t>(t.v - k.col0 < t.colBlock ? t.v - k.col0 : t.colBlock);
  return k;
}

// ---- the cube core ------------------------------------------------------------------

template <typename T, bool kMemorySaving>
class CubeSide {
  using AType = MatmulType<TPosition::GM, CubeFormat::ND, T, true>;
  using BType = MatmulType<TPosition::GM, CubeFormat::ND, T, true>;
  using CType = MatmulType<TPosition::GM, CubeFormat::ND, float>;

 public:
  __aicore__ inline explicit CubeSide(const FusedLinearCrossEntropyLossGradTilingData& tiling) : t_(tiling) {}

  __aicore__ inline void Run(GM_ADDR input, GM_ADDR weight, GM_ADDR user) {
    // The host's tilings (CANN's MultiCoreMatmulTiling) as they are: the AIC's own Matmuls.
    // All three start at the same L1 and L0C address of pipe_ (kernel_tpipe_base.h), so
    // each one's End() comes before the next one's IterateAll.
    if constexpr (kMemorySaving) logitsMm_.Init(&t_.logitsMm, &pipe_);
    inputGradMm_.Init(&t_.inputGradMm, &pipe_);
    weightGradMm_.Init(&t_.weightGradMm, &pipe_);
    xGm_.SetGlobalBuffer((__gm__ T*)input, t_.bt * t_.h);
    wGm_.SetGlobalBuffer((__gm__ T*)weight, t_.v * t_.h);
    GM_ADDR ring = user + GetBlockIdx() * t_.ringBytes;
    if constexpr (kMemorySaving) logitsGm_.SetGlobalBuffer((__gm__ float*)ring, 2 * t_.logitsSlotBytes / sizeof(float));
    gGm_.SetGlobalBuffer((__gm__ T*)(ring + 2 * t_.logitsSlotBytes), 2 * t_.gSlotBytes / sizeof(T));
    accGm_.SetGlobalBuffer((__gm__ float*)(user + t_.accOffset), (t_.bt + t_.v) * t_.h);

    const uint64_t first = GetBlockIdx(), step = GetBlockNum();
    bool haveInit = false;
    uint64_t j = 0, previous = 0;
    for (uint64_t task = first; task < t_.tasks; task += step, ++j) {
      if constexpr (kMemorySaving) Logits(TaskAt(t_, task), j % 2);
      if (j > 0) Partials(TaskAt(t_, previous), (j - 1) % 2, haveInit, task + step < t_.tasks);
      previous = task;
    }
    if (j > 0) Partials(TaskAt(t_, previous), (j - 1) % 2, haveInit, false);
    CrossCoreSetFlag<2, PIPE_FIX>(FLAG_DONE);
  }

 private:
  __aicore__ inline uint64_t SlotElems() const { return uint64_t(t_.rowBlock) * t_.colBlock; }

  // logits[rows, cols] = x[row0.., :] · w[col0.., :]ᵀ, fp32, into slot s (row pitch colBlock).
  __aicore__ inline void Logits(const Task& k, uint64_t s) {
    logitsMm_.SetOrgShape(t_.rowBlock, t_.colBlock, t_.h, t_.h);
    logitsMm_.SetSingleShape(k.rows, k.cols, t_.h);
    logitsMm_.SetTensorA(xGm_[k.row0 * t_.h]);
    logitsMm_.SetTensorB(wGm_[k.col0 * t_.h], true);
    logitsMm_.IterateAll(logitsGm_[s * SlotElems()]);
    logitsMm_.End();
    CrossCoreSetFlag<2, PIPE_FIX>(FLAG_LOGITS + s);
  }

  // acc_x[row0.., :] += G · w[col0.., :];  acc_w[col0.., :] += Gᵀ · x[row0.., :].
  // `slotReused`: this core has a task two ahead, which the AIVs will write into slot s.
  __aicore__ inline void Partials(const Task& k, uint64_t s, bool& haveInit, bool slotReused) {
    CrossCoreWaitFlag(FLAG_G + s);
    if (!haveInit) {  // the first atomic add waits for the zeroed accumulators
      CrossCoreWaitFlag(FLAG_INIT);
      haveInit = true;
    }
    const GlobalTensor<T> g = gGm_[s * SlotElems()];
    inputGradMm_.SetOrgShape(t_.rowBlock, t_.h, t_.colBlock, t_.colBlock);
    inputGradMm_.SetSingleShape(k.rows, t_.h, k.cols);
    inputGradMm_.SetTensorA(g);
    inputGradMm_.SetTensorB(wGm_[k.col0 * t_.h]);
    inputGradMm_.IterateAll(accGm_[k.row0 * t_.h], 1);
    inputGradMm_.End();
    weightGradMm_.SetOrgShape(t_.colBlock, t_.h, t_.rowBlock, t_.rowBlock);
    weightGradMm_.SetSingleShape(k.cols, t_.h, k.rows);
    weightGradMm_.SetTensorA(g, true);
    weightGradMm_.SetTensorB(xGm_[k.row0 * t_.h]);
    weightGradMm_.IterateAll(accGm_[(t_.bt + k.col0) * t_.h], 1);
    weightGradMm_.End();
    if constexpr (!kMemorySaving) {
      if (slotReused) CrossCoreSetFlag<2, PIPE_MTE2>(FLAG_FREE + s);
    }
  }

  const FusedLinearCrossEntropyLossGradTilingData& t_;
  TPipe pipe_;
  MatmulImpl<AType, BType, CType> logitsMm_, inputGradMm_, weightGradMm_;
  GlobalTensor<T> xGm_, wGm_, gGm_;
  GlobalTensor<float> logitsGm_, accGm_;
};

// ---- the vector cores ---------------------------------------------------------------

template <typename T, bool kMemorySaving, typename TTarget>
class VectorSide {
 public:
  __aicore__ inline explicit VectorSide(const FusedLinearCrossEntropyLossGradTilingData& tiling) : t_(tiling) {}

  __aicore__ inline void Run(GM_ADDR grad, GM_ADDR targetMask, GM_ADDR maskedTarget, GM_ADDR logitsMax,
                             GM_ADDR sumExpLogits, GM_ADDR softmax, GM_ADDR inputGrad, GM_ADDR weightGrad,
                             GM_ADDR user) {
    Init(grad, targetMask, maskedTarget, logitsMax, sumExpLogits, softmax, inputGrad, weightGrad, user);
    ZeroAccumulators();
    SyncAll();
    CrossCoreSetFlag<2, PIPE_MTE3>(FLAG_INIT);
    const uint64_t group = GetBlockIdx() / GetTaskRatio(), step = GetBlockNum();
    uint64_t j = 0;
    for (uint64_t task = group; task < t_.tasks; task += step, ++j) {
      const uint64_t s = j % 2;
      if constexpr (kMemorySaving) {
        CrossCoreWaitFlag(FLAG_LOGITS + s);
      } else {
        if (j >= 2) CrossCoreWaitFlag(FLAG_FREE + s);
      }
      MakeG(TaskAt(t_, task), s);
      CrossCoreSetFlag<2, PIPE_MTE3>(FLAG_G + s);
    }
    CrossCoreWaitFlag(FLAG_DONE);
    SyncAll();  // every cube core's atomic adds have landed
    CastAccumulators();
  }

 private:
  __aicore__ inline void Init(GM_ADDR grad, GM_ADDR targetMask, GM_ADDR maskedTarget, GM_ADDR logitsMax,
                              GM_ADDR sumExpLogits, GM_ADDR softmax, GM_ADDR inputGrad, GM_ADDR weightGrad,
                              GM_ADDR user) {
    gradGm_.SetGlobalBuffer((__gm__ float*)grad, t_.bt);
    maskGm_.SetGlobalBuffer((__gm__ uint8_t*)targetMask, (t_.bt + 7) / 8);  // one bit per row
    targetGm_.SetGlobalBuffer((__gm__ TTarget*)maskedTarget, t_.bt);
    if constexpr (kMemorySaving) {
      maxGm_.SetGlobalBuffer((__gm__ float*)logitsMax, t_.bt);
      sumGm_.SetGlobalBuffer((__gm__ float*)sumExpLogits, t_.bt);
    } else {
      softmaxGm_.SetGlobalBuffer((__gm__ float*)softmax, t_.bt * t_.v);
    }
    GM_ADDR ring = user + (GetBlockIdx() / GetTaskRatio()) * t_.ringBytes;
    if constexpr (kMemorySaving) logitsGm_.SetGlobalBuffer((__gm__ float*)ring, 2 * t_.logitsSlotBytes / sizeof(float));
    gGm_.SetGlobalBuffer((__gm__ T*)(ring + 2 * t_.logitsSlotBytes), 2 * t_.gSlotBytes / sizeof(T));
    accGm_.SetGlobalBuffer((__gm__ float*)(user + t_.accOffset), (t_.bt + t_.v) * t_.h);
    inputGradGm_.SetGlobalBuffer((__gm__ T*)inputGrad, t_.bt * t_.h);
    weightGradGm_.SetGlobalBuffer((__gm__ T*)weightGrad, t_.v * t_.h);
    pipe_.InitBuffer(pQue_, BUFFER_NUM, t_.gTileRows * t_.colBlock * sizeof(float));
    pipe_.InitBuffer(gQue_, BUFFER_NUM, t_.gTileRows * t_.colBlock * sizeof(T));
    pipe_.InitBuffer(accInQue_, BUFFER_NUM, t_.castRows * FloatPitch(t_.castCols) * sizeof(float));
    pipe_.InitBuffer(accOutQue_, BUFFER_NUM, t_.castRows * HalfPitch(t_.castCols) * sizeof(T));
    pipe_.InitBuffer(zeroQue_, 1, t_.castRows * FloatPitch(t_.castCols) * sizeof(float));
  }

  // UB row pitches (elements) of `cols` fp32 or half values: whole 32-byte blocks.
  __aicore__ inline static uint32_t FloatPitch(uint32_t cols) { return (cols + 7) / 8 * 8; }
  __aicore__ inline static uint32_t HalfPitch(uint32_t cols) { return (cols + 15) / 16 * 16; }

  // This AIV's share of the rows [0, BT + V) of the [BT + V, H] accumulator matrix.
  __aicore__ inline void MyAccRows(uint64_t& begin, uint64_t& end) const {
    const uint64_t all = t_.bt + t_.v, cores = GetBlockNum() * GetTaskRatio(), me = GetBlockIdx();
    begin = all * me / cores;
    end = all * (me + 1) / cores;
  }

  __aicore__ inline void ZeroAccumulators() {
    uint64_t begin, end;
    MyAccRows(begin, end);
    if (begin == end) return;
    LocalTensor<float> zero = zeroQue_.AllocTensor<float>();
    Duplicate(zero, 0.0f, static_cast<int32_t>(t_.castRows * FloatPitch(t_.castCols)));
    zeroQue_.EnQue(zero);
    zero = zeroQue_.DeQue<float>();
    for (uint64_t r = begin; r < end; r += t_.castRows) {
      const uint32_t rows = static_cast<uint32_t>(end - r < t_.castRows ? end - r : t_.castRows);
      for (uint64_t c = 0; c < t_.h; c += t_.castCols) {
        const uint32_t cols = static_cast<uint32_t>(t_.h - c < t_.castCols ? t_.h - c : t_.castCols);
        // UB rows are FloatPitch(castCols) apart: skip the blocks past `cols`.
        const uint32_t ubGap = (FloatPitch(t_.castCols) - FloatPitch(cols)) / 8;
        DataCopyExtParams params(static_cast<uint16_t>(rows), cols * sizeof(float), ubGap,
                                 static_cast<uint32_t>((t_.h - cols) * sizeof(float)), 0);
        DataCopyPad(accGm_[r * t_.h + c], zero, params);
      }
    }
    zeroQue_.FreeTensor(zero);
  }

  // G for this AIV's half of the task's rows, written to ring slot s (row pitch colBlock).
  __aicore__ inline void MakeG(const Task& k, uint64_t s) {
    const uint32_t half = (k.rows + 1) / 2;
    const uint32_t mine0 = GetSubBlockIdx() == 0 ? 0 : half;
    const uint32_t mineEnd = GetSubBlockIdx() == 0 ? half : k.rows;
    for (uint32_t r = mine0; r < mineEnd; r += t_.gTileRows) {
      const uint32_t rows = mineEnd - r < t_.gTileRows ? mineEnd - r : t_.gTileRows;
      CopyInP(k, s, r, rows);
      ComputeG(k, r, rows);
      CopyOutG(k, s, r, rows);
    }
  }

  __aicore__ inline void CopyInP(const Task& k, uint64_t s, uint32_t r, uint32_t rows) {
    LocalTensor<float> p = pQue_.AllocTensor<float>();
    DataCopyPadExtParams<float> pad(false, 0, 0, 0.0f);
    // UB rows are colBlock floats apart (32-byte multiple): skip the blocks past `cols`.
    const uint32_t ubGap = (t_.colBlock - FloatPitch(k.cols)) / 8;
    if constexpr (kMemorySaving) {
      DataCopyExtParams params(static_cast<uint16_t>(rows), k.cols * sizeof(float),
                               (t_.colBlock - k.cols) * sizeof(float), ubGap, 0);
      DataCopyPad(p, logitsGm_[s * uint64_t(t_.rowBlock) * t_.colBlock + uint64_t(r) * t_.colBlock], params, pad);
    } else {
      DataCopyExtParams params(static_cast<uint16_t>(rows), k.cols * sizeof(float),
                               static_cast<uint32_t>((t_.v - k.cols) * sizeof(float)), ubGap, 0);
      DataCopyPad(p, softmaxGm_[(k.row0 + r) * t_.v + k.col0], params, pad);
    }
    pQue_.EnQue(p);
  }

  __aicore__ inline void ComputeG(const Task& k, uint32_t r, uint32_t rows) {
    LocalTensor<float> p = pQue_.DeQue<float>();
    LocalTensor<T> g = gQue_.AllocTensor<T>();
    for (uint32_t i = 0; i < rows; ++i) {
      const uint64_t row = k.row0 + r + i;
      LocalTensor<float> pr = p[i * t_.colBlock];
      const float grad = gradGm_.GetValue(row);
      const bool masked = ((maskGm_.GetValue(row / 8) >> (row % 8)) & 1) != 0;
      const int64_t target = masked ? -1 : static_cast<int64_t>(targetGm_.GetValue(row));
      if constexpr (kMemorySaving) {
        const float negMax = -maxGm_.GetValue(row);
        const float invSum = 1.0f / sumGm_.GetValue(row);
        Adds(pr, pr, negMax, static_cast<int32_t>(k.cols));
        Exp(pr, pr, static_cast<int32_t>(k.cols));
        Muls(pr, pr, invSum, static_cast<int32_t>(k.cols));
      }
      if (target >= static_cast<int64_t>(k.col0) && target < static_cast<int64_t>(k.col0 + k.cols)) {
        const uint32_t at = static_cast<uint32_t>(target - static_cast<int64_t>(k.col0));
        const TEventID vToS = pipe_.FetchEventID(HardEvent::V_S);
        SetFlag<HardEvent::V_S>(vToS);
        WaitFlag<HardEvent::V_S>(vToS);
        pr.SetValue(at, pr.GetValue(at) - 1.0f);
        const TEventID sToV = pipe_.FetchEventID(HardEvent::S_V);
        SetFlag<HardEvent::S_V>(sToV);
        WaitFlag<HardEvent::S_V>(sToV);
      }
      Muls(pr, pr, grad, static_cast<int32_t>(k.cols));
      Cast(g[i * t_.colBlock], pr, RoundMode::CAST_RINT, k.cols);
    }
    gQue_.EnQue(g);
    pQue_.FreeTensor(p);
  }

  __aicore__ inline void CopyOutG(const Task& k, uint64_t s, uint32_t r, uint32_t rows) {
    LocalTensor<T> g = gQue_.DeQue<T>();
    const uint32_t ubGap = (t_.colBlock - HalfPitch(k.cols)) / 16;
    DataCopyExtParams params(static_cast<uint16_t>(rows), k.cols * sizeof(T), ubGap,
                             (t_.colBlock - k.cols) * sizeof(T), 0);
    DataCopyPad(gGm_[s * uint64_t(t_.rowBlock) * t_.colBlock + uint64_t(r) * t_.colBlock], g, params);
    gQue_.FreeTensor(g);
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

  const FusedLinearCrossEntropyLossGradTilingData& t_;
  TPipe pipe_;
  TQue<QuePosition::VECIN, BUFFER_NUM> pQue_, accInQue_;
  TQue<QuePosition::VECOUT, BUFFER_NUM> gQue_, accOutQue_;
  TQue<QuePosition::VECOUT, 1> zeroQue_;
  GlobalTensor<float> gradGm_, maxGm_, sumGm_, softmaxGm_, logitsGm_, accGm_;
  GlobalTensor<uint8_t> maskGm_;
  GlobalTensor<TTarget> targetGm_;
  GlobalTensor<T> gGm_, inputGradGm_, weightGradGm_;
};

template <bool kMemorySaving, typename T, typename TTarget>
__aicore__ inline void Run(const FusedLinearCrossEntropyLossGradTilingData& tiling, GM_ADDR grad, GM_ADDR input,
                           GM_ADDR weight, GM_ADDR targetMask, GM_ADDR maskedTarget, GM_ADDR logitsMax,
                           GM_ADDR sumExpLogits, GM_ADDR softmax, GM_ADDR inputGrad, GM_ADDR weightGrad,
                           GM_ADDR user) {
  if ASCEND_IS_AIC {
    CubeSide<T, kMemorySaving> cube(tiling);
    cube.Run(input, weight, user);
  }
  if ASCEND_IS_AIV {
    VectorSide<T, kMemorySaving, TTarget> vec(tiling);
    vec.Run(grad, targetMask, maskedTarget, logitsMax, sumExpLogits, softmax, inputGrad, weightGrad, user);
  }
}

}  // namespace

// Tiling key = mode (0 memory-saving, 1 high-performance) + 2 * (bfloat16) +
// 4 * (int64 masked_target); target_mask is always the bit-packed uint8 the op takes.
#define FLCE_CASE(key, ms, T, TT)                                                                                   \
  if (TILING_KEY_IS(key)) {                                                                                       \
    Run<ms, T, TT>(tilingData, grad, input, weight, targetMask, maskedTarget, logitsMax, sumExpLogits, softmax,    \
                   inputGrad, weightGrad, user);                                                                  \
    return;                                                                                                       \
  }

// The CANN aclnn argument order: grad, input, weight, target_mask, masked_target,
// logits_max, sum_exp_logits, softmax (absent optional tensors are null), the two
// outputs, workspace, tiling.
extern "C" __global__ __aicore__ void ascend_ops_fused_linear_cross_entropy_loss_grad(
    GM_ADDR grad, GM_ADDR input, GM_ADDR weight, GM_ADDR targetMask, GM_ADDR maskedTarget, GM_ADDR logitsMax,
    GM_ADDR sumExpLogits, GM_ADDR softmax, GM_ADDR inputGrad, GM_ADDR weightGrad, GM_ADDR workspace,
    GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
  REGISTER_TILING_DEFAULT(FusedLinearCrossEntropyLossGradTilingData);
  GET_TILING_DATA_WITH_STRUCT(FusedLinearCrossEntropyLossGradTilingData, tilingData, tiling);
  // The framework sets the system workspace (the Matmul library's, unused by the AIC's own
  // MatmulImpl objects); ours follows it. On the device GetUserWorkspace returns the
  // workspace + RESERVED_WORKSPACE (16 MiB) whatever its argument, which is what the
  // TilingFunc reserves in front (GetLibApiWorkSpaceSize()).
  GM_ADDR user = GetUserWorkspace(workspace);
  FLCE_CASE(0, true, half, int32_t)
  FLCE_CASE(1, false, half, int32_t)
  FLCE_CASE(2, true, bfloat16_t, int32_t)
  FLCE_CASE(3, false, bfloat16_t, int32_t)
  FLCE_CASE(4, true, half, int64_t)
  FLCE_CASE(5, false, half, int64_t)
  FLCE_CASE(6, true, bfloat16_t, int64_t)
  FLCE_CASE(7, false, bfloat16_t, int64_t)
}
