// The logits-gradient kernel of fused_linear_cross_entropy_loss_grad. For one chunk of
// rows (see the tiling struct):
//
//   P = softmax                                   (high-performance mode), or
//   P = exp(logits − logits_max[i]) / sum_exp_logits[i]   (memory-saving mode)
//   P[i, masked_target[i]] −= 1   where row i is not masked
//   G = half((P) · grad[i])        [rows, V], written for the host's two GEMMs
//
// Stages per tile of one row: CopyIn (fp32 row slice) -> Compute (normalise, subtract
// the one-hot, scale, cast with round-to-nearest-even) -> CopyOut.
#include "kernel_operator.h"
#include "fused_linear_cross_entropy_loss_grad_tiling_data.h"

using namespace AscendC;

namespace {

constexpr int32_t BUFFER_NUM = 2;

template <bool kMemorySaving, typename TOut, bool kMaskPacked, typename TTarget>
class LogitsGradKernel {
 public:
  __aicore__ inline explicit LogitsGradKernel(const FusedLinearCrossEntropyLossGradTilingData& tiling) : t_(tiling) {}

  __aicore__ inline void Init(GM_ADDR grad, GM_ADDR source, GM_ADDR targetMask, GM_ADDR maskedTarget,
                              GM_ADDR logitsMax, GM_ADDR sumExpLogits, GM_ADDR gradLogits) {
    const uint64_t end = t_.rowBegin + t_.rows;  // the [BT] inputs are read up to here
    gradGm_.SetGlobalBuffer((__gm__ float*)grad, end);
    sourceGm_.SetGlobalBuffer((__gm__ float*)source, (t_.rows - 1) * t_.srcRowStride + t_.v);
    if constexpr (kMaskPacked) {
      maskGm_.SetGlobalBuffer((__gm__ uint8_t*)targetMask, (end + 7) / 8);
    } else {
      maskGm_.SetGlobalBuffer((__gm__ uint8_t*)targetMask, end);
    }
    targetGm_.SetGlobalBuffer((__gm__ TTarget*)maskedTarget, end);
    if constexpr (kMemorySaving) {
      maxGm_.SetGlobalBuffer((__gm__ float*)logitsMax, end);
      sumGm_.SetGlobalBuffer((__gm__ float*)sumExpLogits, end);
    }
    outGm_.SetGlobalBuffer((__gm__ TOut*)gradLogits, t_.rows * t_.v);
    pipe_.InitBuffer(inQue_, BUFFER_NUM, t_.inTileBytes);
    pipe_.InitBuffer(outQue_, BUFFER_NUM, t_.outTileBytes);
  }

  __aicore__ inline void Process() {
    const uint64_t block = GetBlockIdx();
    const uint64_t begin = t_.tasks * block / t_.usedCores;
    const uint64_t end = t_.tasks * (block + 1) / t_.usedCores;
    uint64_t loadedRow = ~0ull;
    for (uint64_t task = begin; task < end; ++task) {
      const uint64_t row = task / t_.colTiles;
      const uint64_t col0 = (task % t_.colTiles) * t_.tileCols;
      const uint32_t cols = static_cast<uint32_t>(t_.v - col0 < t_.tileCols ? t_.v - col0 : t_.tileCols);
      if (row != loadedRow) {
        LoadRow(row);
        loadedRow = row;
      }
      CopyIn(row, col0, cols);
      Compute(col0, cols);
      CopyOut(row, col0, cols);
    }
  }

 private:
  // The row's scalars: grad, whether it is masked, its target column, its statistics.
  __aicore__ inline void LoadRow(uint64_t row) {
    const uint64_t i = t_.rowBegin + row;
    grad_ = gradGm_.GetValue(i);
    bool masked;
    if constexpr (kMaskPacked) {
      masked = ((maskGm_.GetValue(i / 8) >> (i % 8)) & 1) != 0;
    } else {
      masked = maskGm_.GetValue(i) != 0;
    }
    target_ = masked ? -1 : static_cast<int64_t>(targetGm_.GetValue(i));
    if constexpr (kMemorySaving) {
      negMax_ = -maxGm_.GetValue(i);
      invSum_ = 1.0f / sumGm_.GetValue(i);
    }
  }

  __aicore__ inline void CopyIn(uint64_t row, uint64_t col0, uint32_t cols) {
    LocalTensor<float> p = inQue_.AllocTensor<float>();
    DataCopyExtParams params(1, cols * sizeof(float), 0, 0, 0);
    DataCopyPadExtParams<float> pad(false, 0, 0, 0.0f);
    DataCopyPad(p, sourceGm_[row * t_.srcRowStride + col0], params, pad);
    inQue_.EnQue(p);
  }

  __aicore__ inline void Compute(uint64_t col0, uint32_t cols) {
    LocalTensor<float> p = inQue_.DeQue<float>();
    if constexpr (kMemorySaving) {
      Adds(p, p, negMax_, cols);
      Exp(p, p, cols);
      Muls(p, p, invSum_, cols);
    }
    if (target_ >= static_cast<int64_t>(col0) && target_ < static_cast<int64_t>(col0 + cols)) {
      const uint32_t at = static_cast<uint32_t>(target_ - static_cast<int64_t>(col0));
      const TEventID vToS = pipe_.FetchEventID(HardEvent::V_S);  // event IDs come from the pipe
      SetFlag<HardEvent::V_S>(vToS);
      WaitFlag<HardEvent::V_S>(vToS);
      p.SetValue(at, p.GetValue(at) - 1.0f);
      const TEventID sToV = pipe_.FetchEventID(HardEvent::S_V);
      SetFlag<HardEvent::S_V>(sToV);
      WaitFlag<HardEvent::S_V>(sToV);
    }
    Muls(p, p, grad_, cols);
    LocalTensor<TOut> g = outQue_.AllocTensor<TOut>();
    Cast(g, p, RoundMode::CAST_RINT, cols);
    outQue_.EnQue(g);
    inQue_.FreeTensor(p);
  }

  __aicore__ inline void CopyOut(uint64_t row, uint64_t col0, uint32_t cols) {
    LocalTensor<TOut> g = outQue_.DeQue<TOut>();
    DataCopyExtParams params(1, cols * sizeof(TOut), 0, 0, 0);
    DataCopyPad(outGm_[row * t_.v + col0], g, params);
    outQue_.FreeTensor(g);
  }

  const FusedLinearCrossEntropyLossGradTilingData& t_;
  TPipe pipe_;
  TQue<QuePosition::VECIN, BUFFER_NUM> inQue_;
  TQue<QuePosition::VECOUT, BUFFER_NUM> outQue_;
  GlobalTensor<float> gradGm_, sourceGm_, maxGm_, sumGm_;
  GlobalTensor<uint8_t> maskGm_;
  GlobalTensor<TTarget> targetGm_;
  GlobalTensor<TOut> outGm_;
  float grad_ = 0.0f, negMax_ = 0.0f, invSum_ = 1.0f;
  int64_t target_ = -1;
};

template <bool kMemorySaving, typename TOut, bool kMaskPacked, typename TTarget>
__aicore__ inline void Run(const FusedLinearCrossEntropyLossGradTilingData& tiling, GM_ADDR grad, GM_ADDR source,
                           GM_ADDR targetMask, GM_ADDR maskedTarget, GM_ADDR logitsMax, GM_ADDR sumExpLogits,
                           GM_ADDR gradLogits) {
  LogitsGradKernel<kMemorySaving, TOut, kMaskPacked, TTarget> op(tiling);
  op.Init(grad, source, targetMask, maskedTarget, logitsMax, sumExpLogits, gradLogits);
  op.Process();
}

}  // namespace

// Tiling key = mode (0 memory-saving, 1 high-performance) + 2 * (bfloat16) +
// 4 * (bit-packed mask) + 8 * (int64 masked_target).
#define FLCE_CASE(key, ms, T, packed, TT)                                                              \
  if (TILING_KEY_IS(key)) {                                                                            \
    Run<ms, T, packed, TT>(tilingData, grad, source, targetMask, maskedTarget, logitsMax, sumExpLogits, \
                           gradLogits);                                                                \
    return;                                                                                            \
  }

extern "C" __global__ __aicore__ void fused_linear_cross_entropy_loss_grad(GM_ADDR grad, GM_ADDR source,
                                                                           GM_ADDR targetMask,
                                                                           GM_ADDR maskedTarget,
                                                                           GM_ADDR logitsMax,
                                                                           GM_ADDR sumExpLogits,
                                                                           GM_ADDR gradLogits, GM_ADDR workspace,
                                                                           GM_ADDR tiling) {
  REGISTER_TILING_DEFAULT(FusedLinearCrossEntropyLossGradTilingData);
  GET_TILING_DATA_WITH_STRUCT(FusedLinearCrossEntropyLossGradTilingData, tilingData, tiling);
  (void)workspace;
  FLCE_CASE(0, true, half, false, int32_t)
  FLCE_CASE(1, false, half, false, int32_t)
  FLCE_CASE(2, true, bfloat16_t, false, int32_t)
  FLCE_CASE(3, false, bfloat16_t, false, int32_t)
  FLCE_CASE(4, true, half, true, int32_t)
  FLCE_CASE(5, false, half, true, int32_t)
  FLCE_CASE(6, true, bfloat16_t, true, int32_t)
  FLCE_CASE(7, false, bfloat16_t, true, int32_t)
  FLCE_CASE(8, true, half, false, int64_t)
  FLCE_CASE(9, false, half, false, int64_t)
  FLCE_CASE(10, true, bfloat16_t, false, int64_t)
  FLCE_CASE(11, false, bfloat16_t, false, int64_t)
  FLCE_CASE(12, true, half, true, int64_t)
  FLCE_CASE(13, false, half, true, int64_t)
  FLCE_CASE(14, true, bfloat16_t, true, int64_t)
  FLCE_CASE(15, false, bfloat16_t, true, int64_t)
}
