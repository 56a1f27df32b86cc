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
// With the loss options (kOptions, tiling key bit 8; SPEC §7, as the CPU option stage
// op_plugin/csrc/cpu/cross_entropy/logit_options.h computes them), per row:
//
//   y_j  = cap·tanh(s·(raw_j + b_j)/cap)   (memory-saving: raw = the logits block; no soft-cap:
//          s·(raw_j + b_j); high-performance mode starts from P, where these are done)
//   P_j  = exp(y_j − logits_max[i]) / sum_exp_logits[i]
//   dy_j = alpha[i]·P_j − beta[i]·[j == t] − gamma[i]·w_j       (w_j = 1 without class weights)
//   G_j  = cast(s·(1 − (y_j/cap)²)·dy_j)                        (no soft-cap: s·dy_j)
//
// alpha, beta, gamma [BT] replace grad (the host folds the upstream gradient, the
// reduction, label smoothing and z-loss into them); the plain kernel (kOptions false)
// compiles none of this. tanh(u) = 1 − 2/(exp(2u) + 1) (Exp, Adds, Div: the basic API;
// exp overflowing to +inf gives 1, underflowing to 0 gives −1, as tanh).
//
// Every instruction that reads (or overwrites) UB bytes the one before it wrote (or reads)
// follows a PipeBarrier<PIPE_V> or the V_S/S_V pair around the one-hot's scalar update, as
// in CANN's own vector stage (ops-nn v9.0.0 fused_linear_cross_entropy_loss_grad_mem_friendly.h
// :629, :632, :643, :666-668; high_perf.h:420): correct without bisheng's auto-sync.
//
// Targets: a row that is not masked must have its target in [0, V). One that is not is
// computed as masked (nothing indexes with it) and reported: the first such row this vector
// core saw goes to the workspace, and the host raises naming it (SPEC §1, as the CPU path).
// Include after kernel_operator.h and …_tiling_data.h (FlceOption).
#pragma once

#include <cstdint>

namespace flce {

using namespace AscendC;

// What G needs of row i besides P.
struct GRowScalars {
  float negMax;    // −logits_max[i] (memory-saving)
  float invSum;    // 1 / sum_exp_logits[i] (memory-saving)
  float grad;      // grad[i]; with the options alpha[i]
  float beta;      // with the options: beta[i] (the one-hot's coefficient), else grad[i]
  float gamma;     // with the options: gamma[i] (the class weights' coefficient), else 0
  int64_t target;  // the column holding the −1, or −1 when masked
};

// The loss options' operands (kOptions): GM addresses and the tiling's values.
struct GOptions {
  // One declaration each: GM_ADDR may be a macro (`uint8_t*`), which binds to the first name only.
  GM_ADDR bias;
  GM_ADDR classWeight;
  GM_ADDR alpha;
  GM_ADDR beta;
  GM_ADDR gamma;
  uint32_t flags;  // FlceOption bits (…_tiling_data.h)
  float logitScale, softcap;
};

template <typename T, typename TTarget, bool kFromLogits, bool kOptions = false>
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

  // The options' operands and UB: `cols` columns at most per Apply (colBlock, or chunkCols).
  __aicore__ inline void InitOptions(TPipe& pipe, const GOptions& o, uint64_t bt, uint32_t cols) {
    if constexpr (kOptions) {
      o_ = o;
      alphaGm_.SetGlobalBuffer((__gm__ float*)o.alpha, bt);
      betaGm_.SetGlobalBuffer((__gm__ float*)o.beta, bt);
      gammaGm_.SetGlobalBuffer((__gm__ float*)o.gamma, bt);
      if (o.flags & kFlceOptBias) biasGm_.SetGlobalBuffer((__gm__ float*)o.bias, v_);
      if (o.flags & kFlceOptClassWeight) weightGm_.SetGlobalBuffer((__gm__ float*)o.classWeight, v_);
      const uint32_t bytes = (cols + 7) / 8 * 8 * sizeof(float);
      // Only the buffers this call's options use (the tiling counts them in UB).
      if (kFromLogits && (o.flags & kFlceOptBias)) pipe.InitBuffer(biasBuf_, bytes);
      if (o.flags & kFlceOptClassWeight) pipe.InitBuffer(weightBuf_, bytes);
      if (o.flags & kFlceOptSoftcap) pipe.InitBuffer(tanhBuf_, bytes);
      if (o.flags & (kFlceOptSoftcap | kFlceOptClassWeight)) pipe.InitBuffer(scratchBuf_, bytes);
      loadedCol0_ = ~uint64_t(0);
    }
  }

  // Loads the bias and class weights of columns [col0, col0 + cols) into UB, unless they
  // are there already (memory-saving: once per logits task, the one column block of a
  // window this core works on; high-performance: once per chunk for all of a core's rows).
  __aicore__ inline void LoadColumns(uint64_t col0, uint32_t cols) {
    if constexpr (kOptions) {
      const uint32_t wanted = kFromLogits ? uint32_t(kFlceOptBias | kFlceOptClassWeight)
                                         : uint32_t(kFlceOptClassWeight);  // high-performance: the softmax has the bias
      if ((o_.flags & wanted) == 0 || (col0 == loadedCol0_ && cols == loadedCols_)) return;
      // The previous tile's vector work reads these buffers: it is done before MTE2 rewrites them.
      const TEventID vToMte2 = GetTPipePtr()->FetchEventID(HardEvent::V_MTE2);
      SetFlag<HardEvent::V_MTE2>(vToMte2);
      WaitFlag<HardEvent::V_MTE2>(vToMte2);
      DataCopyPadExtParams<float> pad(false, 0, 0, 0.0f);
      const DataCopyExtParams in(1, cols * sizeof(float), 0, 0, 0);
      if (kFromLogits && (o_.flags & kFlceOptBias)) DataCopyPad(biasBuf_.Get<float>(), biasGm_[col0], in, pad);
      if (o_.flags & kFlceOptClassWeight) DataCopyPad(weightBuf_.Get<float>(), weightGm_[col0], in, pad);
      const TEventID mte2ToV = GetTPipePtr()->FetchEventID(HardEvent::MTE2_V);
      SetFlag<HardEvent::MTE2_V>(mte2ToV);
      WaitFlag<HardEvent::MTE2_V>(mte2ToV);
      loadedCol0_ = col0;
      loadedCols_ = cols;
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
    if constexpr (kOptions) {
      r.grad = alphaGm_.GetValue(row);
      r.beta = betaGm_.GetValue(row);
      r.gamma = gammaGm_.GetValue(row);
    } else {
      r.beta = r.grad;
      r.gamma = 0.0f;
    }
    return r;
  }

  // p[0, cols) holds columns [col0, col0 + cols) of row r's logits (memory-saving) or P;
  // g[0, cols) receives G. p is overwritten.
  __aicore__ inline void Apply(const LocalTensor<float>& p, const LocalTensor<T>& g, uint32_t cols, uint64_t col0,
                               const GRowScalars& r) {
    const int32_t n = static_cast<int32_t>(cols);
    if constexpr (kOptions) {
      ApplyOptions(p, g, cols, col0, r);
      return;
    }
    if constexpr (kFromLogits) {
      Adds(p, p, r.negMax, n);
      PipeBarrier<PIPE_V>();
      Exp(p, p, n);
      PipeBarrier<PIPE_V>();
      Muls(p, p, r.invSum, n);
    }
    SubtractOneHot(p, cols, col0, r, 1.0f);
    Muls(p, p, r.grad, n);
    PipeBarrier<PIPE_V>();
    Cast(g, p, RoundMode::CAST_RINT, cols);
  }

  // p[target − col0] −= scale when row r's target lies in [col0, col0 + cols): a scalar
  // update between the vector pipe's V_S and S_V flags, which also order the vector
  // instructions around it; without it, a PipeBarrier<PIPE_V> does (as CANN's ComputeV1:
  // its MulV1 follows UpdateV1's S_V flag with no barrier, mem_friendly.h:635-641).
  __aicore__ inline void SubtractOneHot(const LocalTensor<float>& p, uint32_t cols, uint64_t col0,
                                        const GRowScalars& r, float scale) {
    if (r.target >= static_cast<int64_t>(col0) && r.target < static_cast<int64_t>(col0 + cols)) {
      const uint32_t at = static_cast<uint32_t>(r.target - static_cast<int64_t>(col0));
      const TEventID vToS = GetTPipePtr()->FetchEventID(HardEvent::V_S);
      SetFlag<HardEvent::V_S>(vToS);
      WaitFlag<HardEvent::V_S>(vToS);
      p.SetValue(at, p.GetValue(at) - scale);
      const TEventID sToV = GetTPipePtr()->FetchEventID(HardEvent::S_V);
      SetFlag<HardEvent::S_V>(sToV);
      WaitFlag<HardEvent::S_V>(sToV);
    } else {
      PipeBarrier<PIPE_V>();
    }
  }

  // The options' form of Apply (the top's formulas); LoadColumns(col0, cols) came first.
  // Every step reads what the one before wrote: a PipeBarrier<PIPE_V> between each (the
  // first also orders this row's t and scratch writes after the previous row's reads).
  __aicore__ inline void ApplyOptions(const LocalTensor<float>& p, const LocalTensor<T>& g, uint32_t cols,
                                      uint64_t col0, const GRowScalars& r) {
    const int32_t n = static_cast<int32_t>(cols);
    const bool softcap = (o_.flags & kFlceOptSoftcap) != 0, scaled = (o_.flags & kFlceOptScale) != 0;
    LocalTensor<float> t;
    if (softcap) t = tanhBuf_.Get<float>();
    PipeBarrier<PIPE_V>();
    if constexpr (kFromLogits) {
      if (o_.flags & kFlceOptBias) {
        Add(p, p, biasBuf_.Get<float>(), n);
        PipeBarrier<PIPE_V>();
      }
      if (scaled) {
        Muls(p, p, o_.logitScale, n);
        PipeBarrier<PIPE_V>();
      }
      if (softcap) {  // t = tanh(p / cap) = 1 − 2/(exp(2p/cap) + 1); y = cap·t
        LocalTensor<float> two = scratchBuf_.Get<float>();
        // 2/cap clamped to the largest float: below 2/FLT_MAX (a subnormal cap) it would be
        // inf, and inf · 0 a NaN at a zero logit; the clamped product still saturates t.
        const float twoOverCap = o_.softcap > 2.0f / 3.40282347e38f ? 2.0f / o_.softcap : 3.40282347e38f;
        Muls(t, p, twoOverCap, n);
        Duplicate(two, 2.0f, n);
        PipeBarrier<PIPE_V>();
        Exp(t, t, n);
        PipeBarrier<PIPE_V>();
        Adds(t, t, 1.0f, n);
        PipeBarrier<PIPE_V>();
        Div(t, two, t, n);
        PipeBarrier<PIPE_V>();
        Muls(t, t, -1.0f, n);
        PipeBarrier<PIPE_V>();
        Adds(t, t, 1.0f, n);
        PipeBarrier<PIPE_V>();
        Muls(p, t, o_.softcap, n);
        PipeBarrier<PIPE_V>();
      }
      Adds(p, p, r.negMax, n);
      PipeBarrier<PIPE_V>();
      Exp(p, p, n);
      PipeBarrier<PIPE_V>();
      Muls(p, p, r.invSum, n);
      PipeBarrier<PIPE_V>();
    }
    Muls(p, p, r.grad, n);  // alpha·P
    SubtractOneHot(p, cols, col0, r, r.beta);
    if (o_.flags & kFlceOptClassWeight) {  // − gamma·w_j
      LocalTensor<float> gw = scratchBuf_.Get<float>();
      Muls(gw, weightBuf_.Get<float>(), -r.gamma, n);
      PipeBarrier<PIPE_V>();
      Add(p, p, gw, n);
    } else {
      Adds(p, p, -r.gamma, n);
    }
    PipeBarrier<PIPE_V>();
    if (softcap) {  // · (1 − t²)
      Mul(t, t, t, n);
      PipeBarrier<PIPE_V>();
      Muls(t, t, -1.0f, n);
      PipeBarrier<PIPE_V>();
      Adds(t, t, 1.0f, n);
      PipeBarrier<PIPE_V>();
      Mul(p, p, t, n);
      PipeBarrier<PIPE_V>();
    }
    if (scaled) {
      Muls(p, p, o_.logitScale, n);
      PipeBarrier<PIPE_V>();
    }
    Cast(g, p, RoundMode::CAST_RINT, cols);
  }

  // The first row with an unmasked target outside [0, V) this core checked, or −1.
  __aicore__ inline int64_t FirstBadRow() const { return firstBadRow_; }

 private:
  uint64_t v_ = 0;
  int64_t firstBadRow_ = -1;
  GlobalTensor<float> gradGm_, maxGm_, sumGm_;
  // The options (kOptions).
  GOptions o_{};
  GlobalTensor<float> alphaGm_, betaGm_, gammaGm_, biasGm_, weightGm_;
  TBuf<TPosition::VECCALC> biasBuf_, weightBuf_, tanhBuf_, scratchBuf_;
  uint64_t loadedCol0_ = 0;
  uint32_t loadedCols_ = 0;
  GlobalTensor<uint8_t> maskGm_;
  GlobalTensor<TTarget> targetGm_;
};

}  // namespace flce
