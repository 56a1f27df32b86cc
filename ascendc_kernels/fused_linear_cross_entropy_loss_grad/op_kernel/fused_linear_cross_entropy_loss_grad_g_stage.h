// The vector stage of fused_linear_cross_entropy_loss_grad: one row of P (fp32, in UB) ->
// one row of G (the input dtype, in UB), SPEC §1:
//
//   P = exp(logits − logits_max[i]) / sum_exp_logits[i]   (memory-saving: P from the logits)
//   P[i, masked_target[i]] −= 1                             (rows not masked)
//   G = cast(P · grad[i])                                   round to nearest even
//
// Both modes run it (memory-saving on a logits block's rows, high-performance on softmax
// row chunks). It is the one place for per-element and per-row terms of the loss: a new
// option reads its per-row scalars in Row() and applies itself in Apply().
//
// Targets: a row that is not masked must have its target in [0, V). One that is not is
// computed as masked (nothing indexes with it) and reported: the first such row this vector
// core saw goes to the workspace, and the host raises naming it (SPEC §1, as the CPU path).
// Include after kernel_operator.h.
#pragma once

#include <cstdint>

namespace flce {

using namespace AscendC;

// What G needs of row i besides P.
struct GRowScalars {
  float negMax;    // −logits_max[i] (memory-saving)
  float invSum;    // 1 / sum_exp_logits[i] (memory-saving)
  float grad;      // grad[i]
  int64_t target;  // the column holding the −1, or −1 when masked
};

template <typename T, typename TTarget, bool kFromLogits>
class GStage {
 public:
  __aicore__ inline void Init(GM_ADDR grad, GM_ADDR targetMask, GM_ADDR maskedTarget, GM_ADDR logitsMax,
                              GM_ADDR sumExpLogits, uint64_t bt, uint64_t v) {
    v_ = v;
    gradGm_.SetGlobalBuffer((__gm__ float*)grad, bt);
    maskGm_.SetGlobalBuffer((__gm__ uint8_t*)targetMask, (bt + 7) / 8);  // one bit per row
    targetGm_.SetGlobalBuffer((__gm__ TTarget*)maskedTarget, bt);
    if constexpr (kFromLogits) {
      maxGm_.SetGlobalBuffer((__gm__ float*)logitsMax, bt);
      sumGm_.SetGlobalBuffer((__gm__ float*)sumExpLogits, bt);
    }
  }

  // Row i's scalars. `checkTarget`: this is the one place row i's target is looked at
  // (each row is checked once: its first column block, or its first chunk).
  __aicore__ inline GRowScalars Row(uint64_t row, bool checkTarget) {
    GRowScalars r;
    r.grad = gradGm_.GetValue(row);
    const bool masked = ((maskGm_.GetValue(row / 8) >> (row % 8)) & 1) != 0;
    r.target = masked ? -1 : static_cast<int64_t>(targetGm_.GetValue(row));
    if (!masked && (r.target < 0 || r.target >= static_cast<int64_t>(v_))) {
      if (checkTarget && firstBadRow_ < 0) firstBadRow_ = static_cast<int64_t>(row);
      r.target = -1;  // computed as masked: nothing is written outside the row
    }
    if constexpr (kFromLogits) {
      r.negMax = -maxGm_.GetValue(row);
      r.invSum = 1.0f / sumGm_.GetValue(row);
    } else {
      r.negMax = 0.0f;
      r.invSum = 1.0f;
    }
    return r;
  }

  // p[0, cols) holds columns [col0, col0 + cols) of row r's logits (memory-saving) or P;
  // g[0, cols) receives G. p is overwritten.
  __aicore__ inline void Apply(const LocalTensor<float>& p, const LocalTensor<T>& g, uint32_t cols, uint64_t col0,
                               const GRowScalars& r) {
    const int32_t n = static_cast<int32_t>(cols);
    if constexpr (kFromLogits) {
      Adds(p, p, r.negMax, n);
      Exp(p, p, n);
      Muls(p, p, r.invSum, n);
    }
    if (r.target >= static_cast<int64_t>(col0) && r.target < static_cast<int64_t>(col0 + cols)) {
      const uint32_t at = static_cast<uint32_t>(r.target - static_cast<int64_t>(col0));
      const TEventID vToS = GetTPipePtr()->FetchEventID(HardEvent::V_S);
      SetFlag<HardEvent::V_S>(vToS);
      WaitFlag<HardEvent::V_S>(vToS);
      p.SetValue(at, p.GetValue(at) - 1.0f);
      const TEventID sToV = GetTPipePtr()->FetchEventID(HardEvent::S_V);
      SetFlag<HardEvent::S_V>(sToV);
      WaitFlag<HardEvent::S_V>(sToV);
    }
    Muls(p, p, r.grad, n);
    Cast(g, p, RoundMode::CAST_RINT, cols);
  }

  // The first row with an unmasked target outside [0, V) this core checked, or −1.
  __aicore__ inline int64_t FirstBadRow() const { return firstBadRow_; }

 private:
  uint64_t v_ = 0;
  int64_t firstBadRow_ = -1;
  GlobalTensor<float> gradGm_, maxGm_, sumGm_;
  GlobalTensor<uint8_t> maskGm_;
  GlobalTensor<TTarget> targetGm_;
};

}  // namespace flce
