// batch_norm_reduce_backward: per-channel Σ dy and Σ dy·(x − mean) in one pass over
// grad_out and input, then grad_weight = Σ dy·(x − mean) · invstd and grad_bias = Σ dy.
//
// Stages per tile: CopyIn (DataCopyPad of tileRows strided rows, zero padded to 32 bytes)
// -> Compute (cast to fp32, x − mean, accumulate both sums lane-wise in fp32); per task
// the lanes are reduced once (ReduceSum, or a fold over rows and each channel's lanes
// when a tile spans several channels). mean/invstd are read as float32, float16 or
// bfloat16 (one scalar per channel, widened on the scalar unit). See the tiling struct for
// the tile shapes and the multi-core split. Every flag's event ID comes from the pipe.
#include <type_traits>  // std::is_same

#include "kernel_operator.h"
#include "batch_norm_reduce_backward_tiling_data.h"

using namespace AscendC;

namespace {

constexpr int32_t BUFFER_NUM = 2;
constexpr uint32_t BLOCK_BYTES = 32;  // UB data block: DataCopy granule and row alignment

// The scalar unit widens a statistic to float.
template <typename TStat>
__aicore__ inline float StatToFloat(TStat v) {
  if constexpr (std::is_same<TStat, bfloat16_t>::value) {
    return ToFloat(v);
  } else {
    return static_cast<float>(v);
  }
}

template <typename T, typename TStat, typename TOut>
class BatchNormReduceBackwardKernel {
 public:
  __aicore__ inline BatchNormReduceBackwardKernel(const BatchNormReduceBackwardTilingData& tiling) : t_(tiling) {}

  __aicore__ inline void Init(GM_ADDR gradOut, GM_ADDR input, GM_ADDR mean, GM_ADDR invstd, GM_ADDR sumDy,
                              GM_ADDR sumDyXmu, GM_ADDR gradWeight, GM_ADDR gradBias, GM_ADDR workspace) {
    const uint64_t total = t_.n * t_.c * t_.s;
    if (total > 0) {
      dyGm_.SetGlobalBuffer((__gm__ T*)gradOut, total);
      xGm_.SetGlobalBuffer((__gm__ T*)input, total);
    }
    meanGm_.SetGlobalBuffer((__gm__ TStat*)mean, t_.c);
    invstdGm_.SetGlobalBuffer((__gm__ TStat*)invstd, t_.c);
    if (t_.inputG) {
      outGm_[0].SetGlobalBuffer((__gm__ TOut*)sumDy, t_.c);
      outGm_[1].SetGlobalBuffer((__gm__ TOut*)sumDyXmu, t_.c);
    }
    if (t_.weightG) outGm_[2].SetGlobalBuffer((__gm__ TOut*)gradWeight, t_.c);
    if (t_.biasG) outGm_[3].SetGlobalBuffer((__gm__ TOut*)gradBias, t_.c);
    if (t_.segments > 1)
      partialGm_.SetGlobalBuffer((__gm__ float*)GetUserWorkspace(workspace), uint64_t(t_.segments) * t_.c * 2);

    pipe_.InitBuffer(dyQue_, BUFFER_NUM, t_.accElems * sizeof(T));
    pipe_.InitBuffer(xQue_, BUFFER_NUM, t_.accElems * sizeof(T));
    if constexpr (!IsFloat()) pipe_.InitBuffer(castBuf_, 2 * t_.accElems * sizeof(float));
    pipe_.InitBuffer(accBuf_, 2 * t_.accElems * sizeof(float));
    if (t_.channelsPerTile > 1) pipe_.InitBuffer(meanBuf_, t_.accElems * sizeof(float));
    pipe_.InitBuffer(reduceTmpBuf_, (t_.accElems / 64 + 8) * sizeof(float));
    pipe_.InitBuffer(resultBuf_, 16 * sizeof(float));
    pipe_.InitBuffer(stageBuf_, 4 * t_.stageChannels * sizeof(float));
    if constexpr (!IsFloatOut()) pipe_.InitBuffer(stageOutBuf_, 4 * t_.stageChannels * sizeof(TOut));
    pipe_.InitBuffer(partialBuf_, 2 * t_.stageChannels * sizeof(float));
    pipe_.InitBuffer(combineBuf_, 64 * 8 * sizeof(float));  // one 32-byte block per segment
  }

  __aicore__ inline void Process() {
    const uint64_t block = GetBlockIdx();
    const uint64_t taskBegin = t_.tasks * block / t_.usedCores;
    const uint64_t taskEnd = t_.tasks * (block + 1) / t_.usedCores;
    const uint64_t tilesPerBlock = t_.rowTiles * t_.colTiles;
    staged_ = 0;
    for (uint64_t task = taskBegin; task < taskEnd; ++task) {
      const uint64_t channelBlock = task / t_.segments;
      const uint64_t segment = task % t_.segments;
      const uint64_t first = channelBlock * t_.channelsPerTile;
      const uint32_t channels = static_cast<uint32_t>(
          t_.c - first < t_.channelsPerTile ? t_.c - first : t_.channelsPerTile);
      ReduceSegment(first, channels, tilesPerBlock * segment / t_.segments,
                    tilesPerBlock * (segment + 1) / t_.segments);
      if (t_.segments == 1) {
        for (uint32_t j = 0; j < channels; ++j) StageResult(first + j, sums_[2 * j], sums_[2 * j + 1]);
      } else {
        WritePartials(segment, first, channels);
      }
    }
    if (t_.segments == 1) {
      FlushResults();
      return;
    }
    SyncAll();  // every partial is in the workspace
    const uint64_t channelBegin = t_.c * block / t_.usedCores;
    const uint64_t channelEnd = t_.c * (block + 1) / t_.usedCores;
    for (uint64_t channel = channelBegin; channel < channelEnd; ++channel) CombineChannel(channel);
    FlushResults();
  }

 private:
  static constexpr bool IsFloat() { return sizeof(T) == sizeof(float); }

  // One pipe waits for another; the event ID comes from the pipe, never a literal.
  template <HardEvent event>
  __aicore__ inline void Sync() {
    const TEventID id = pipe_.FetchEventID(event);
    SetFlag<event>(id);
    WaitFlag<event>(id);
  }
  static constexpr bool IsFloatOut() { return sizeof(TOut) == sizeof(float); }

  // sums_[2j], sums_[2j+1] = Σ dy, Σ dy·(x − mean) of channel first + j over tiles
  // [tileBegin, tileEnd) of the channel block.
  __aicore__ inline void ReduceSegment(uint64_t first, uint32_t channels, uint64_t tileBegin, uint64_t tileEnd) {
    for (uint32_t j = 0; j < 2 * channels; ++j) sums_[j] = 0.0f;
    if (tileBegin == tileEnd) return;
    LocalTensor<float> accDy = accBuf_.Get<float>();
    LocalTensor<float> accDyXmu = accDy[t_.accElems];
    Duplicate(accDy, 0.0f, t_.accElems);
    Duplicate(accDyXmu, 0.0f, t_.accElems);
    PipeBarrier<PIPE_V>();  // the first tile's Adds read the zeroed accumulators
    float negMean = 0.0f;
    if (t_.channelsPerTile == 1) {
      negMean = -StatToFloat(meanGm_.GetValue(first));
    } else {
      FillMeanTile(first, channels);
    }
    for (uint64_t tile = tileBegin; tile < tileEnd; ++tile) {
      const uint32_t count = CopyIn(first, channels, tile);
      Compute(negMean, count, accDy, accDyXmu);
    }
    if (t_.channelsPerTile == 1) {
      LocalTensor<float> result = resultBuf_.Get<float>();
      LocalTensor<float> tmp = reduceTmpBuf_.Get<float>();
      ReduceSum(result, accDy, tmp, t_.accElems);
      PipeBarrier<PIPE_V>();  // both use tmp
      ReduceSum(result[8], accDyXmu, tmp, t_.accElems);
      Sync<HardEvent::V_S>();
      sums_[0] = result.GetValue(0);
      sums_[1] = result.GetValue(8);
    } else {
      FoldRows(accDy);
      FoldRows(accDyXmu);
      Sync<HardEvent::V_S>();
      for (uint32_t j = 0; j < channels; ++j) {  // each channel's S lanes, in order
        for (uint64_t i = j * t_.s; i < (j + 1) * t_.s; ++i) {
          sums_[2 * j] += accDy.GetValue(static_cast<uint32_t>(i));
          sums_[2 * j + 1] += accDyXmu.GetValue(static_cast<uint32_t>(i));
        }
      }
    }
    Sync<HardEvent::S_V>();
  }

  // The per-lane mean of a K-channel tile: row 0 written by the scalar unit, then copied
  // to every row (a vector Adds of 0 is the copy) so one Sub serves the whole tile.
  __aicore__ inline void FillMeanTile(uint64_t first, uint32_t channels) {
    LocalTensor<float> mean = meanBuf_.Get<float>();
    for (uint32_t j = 0; j < channels; ++j) {
      const float m = StatToFloat(meanGm_.GetValue(first + j));
      for (uint64_t i = j * t_.s; i < (j + 1) * t_.s; ++i) mean.SetValue(static_cast<uint32_t>(i), m);
    }
    for (uint32_t i = channels * static_cast<uint32_t>(t_.s); i < t_.tilePitch; ++i) mean.SetValue(i, 0.0f);
    Sync<HardEvent::S_V>();
    for (uint32_t r = 1; r < t_.tileRows; ++r) Adds(mean[r * t_.tilePitch], mean, 0.0f, t_.tilePitch);
    PipeBarrier<PIPE_V>();  // the tiles' Sub reads every row
  }

  // Adds the accumulator's rows pairwise until row 0 holds their sum (a fixed tree).
  __aicore__ inline void FoldRows(const LocalTensor<float>& acc) {
    uint32_t rows = t_.tileRows;
    while (rows > 1) {
      const uint32_t half = rows / 2;
      const uint32_t keep = rows - half;
      Add(acc, acc, acc[keep * t_.tilePitch], half * t_.tilePitch);
      PipeBarrier<PIPE_V>();  // the next level adds what this one wrote
      rows = keep;
    }
  }

  // Copies tile `tile` of the channel block starting at `first` into the input queues;
  // returns its padded length.
  __aicore__ inline uint32_t CopyIn(uint64_t first, uint32_t channels, uint64_t tile) {
    const uint64_t width = channels * t_.s;  // contiguous elements of one row in this block
    const uint64_t row0 = (tile / t_.colTiles) * t_.tileRows;
    const uint64_t col0 = (tile % t_.colTiles) * t_.tileCols;
    const uint32_t rows = static_cast<uint32_t>(t_.n - row0 < t_.tileRows ? t_.n - row0 : t_.tileRows);
    const uint32_t cols = static_cast<uint32_t>(width - col0 < t_.tileCols ? width - col0 : t_.tileCols);
    const uint32_t pitch = (cols * sizeof(T) + BLOCK_BYTES - 1) / BLOCK_BYTES * BLOCK_BYTES / sizeof(T);
    // A multi-channel tile keeps the full tile's row pitch (a narrower last channel block
    // leaves a gap) so its lanes line up with the mean tile.
    const uint32_t rowPitch = t_.channelsPerTile == 1 ? pitch : t_.tilePitch;
    const uint64_t offset = (row0 * t_.c + first) * t_.s + col0;
    // rows blocks of cols elements, one row (C*S elements) apart in GM.
    DataCopyExtParams params(static_cast<uint16_t>(rows), cols * sizeof(T),
                             static_cast<uint32_t>((t_.c * t_.s - cols) * sizeof(T)),
                             (rowPitch - pitch) * sizeof(T) / BLOCK_BYTES, 0);
    DataCopyPadExtParams<T> pad(true, 0, static_cast<uint8_t>(pitch - cols), T(0.0f));
    LocalTensor<T> dy = dyQue_.AllocTensor<T>();
    LocalTensor<T> x = xQue_.AllocTensor<T>();
    DataCopyPad(dy, dyGm_[offset], params, pad);
    DataCopyPad(x, xGm_[offset], params, pad);
    dyQue_.EnQue(dy);
    xQue_.EnQue(x);
    return rows * rowPitch;
  }

  __aicore__ inline void Compute(float negMean, uint32_t count, const LocalTensor<float>& accDy,
                                 const LocalTensor<float>& accDyXmu) {
    LocalTensor<T> dy = dyQue_.DeQue<T>();
    LocalTensor<T> x = xQue_.DeQue<T>();
    LocalTensor<float> dyF;
    LocalTensor<float> xF;
    // Explicit same-pipe barriers where an instruction reads (or overwrites) what the one
    // before wrote (or reads), as CANN's kernels have them (no reliance on auto-sync).
    if constexpr (IsFloat()) {
      dyF = dy.template ReinterpretCast<float>();
      xF = x.template ReinterpretCast<float>();
    } else {
      dyF = castBuf_.Get<float>();
      xF = dyF[t_.accElems];
      Cast(dyF, dy, RoundMode::CAST_NONE, count);
      Cast(xF, x, RoundMode::CAST_NONE, count);
      PipeBarrier<PIPE_V>();
    }
    if (t_.channelsPerTile == 1) {
      Adds(xF, xF, negMean, count);  // x − mean, exact enough in fp32 even for |mean| ≫ std
    } else {
      Sub(xF, xF, meanBuf_.Get<float>(), count);
    }
    Add(accDy, accDy, dyF, count);
    PipeBarrier<PIPE_V>();
    Mul(xF, xF, dyF, count);        // dy·(x − mean)
    PipeBarrier<PIPE_V>();
    Add(accDyXmu, accDyXmu, xF, count);
    PipeBarrier<PIPE_V>();  // the next tile's Casts overwrite dyF and xF; the reduction reads the sums
    dyQue_.FreeTensor(dy);
    xQue_.FreeTensor(x);
  }

  // The four outputs of `channel`, staged as fp32 rows [sum_dy | sum_dy_xmu | grad_weight | grad_bias].
  __aicore__ inline void StageResult(uint64_t channel, float sumDy, float sumDyXmu) {
    if (staged_ == 0) stageFirst_ = channel;
    LocalTensor<float> stage = stageBuf_.Get<float>();
    const uint32_t k = staged_;
    stage.SetValue(k, sumDy);
    stage.SetValue(t_.stageChannels + k, sumDyXmu);
    stage.SetValue(2 * t_.stageChannels + k, sumDyXmu * StatToFloat(invstdGm_.GetValue(channel)));
    stage.SetValue(3 * t_.stageChannels + k, sumDy);
    if (++staged_ == t_.stageChannels) FlushResults();
  }

  __aicore__ inline void FlushResults() {
    if (staged_ == 0) return;
    const bool wanted[4] = {t_.inputG != 0, t_.inputG != 0, t_.weightG != 0, t_.biasG != 0};
    LocalTensor<float> stage = stageBuf_.Get<float>();
    DataCopyExtParams params(1, staged_ * sizeof(TOut), 0, 0, 0);
    if constexpr (IsFloatOut()) {
      Sync<HardEvent::S_MTE3>();
      for (int i = 0; i < 4; ++i)
        if (wanted[i]) DataCopyPad(outGm_[i][stageFirst_], stage[i * t_.stageChannels], params);
    } else {
      LocalTensor<TOut> out = stageOutBuf_.Get<TOut>();
      Sync<HardEvent::S_V>();
      for (int i = 0; i < 4; ++i)
        if (wanted[i]) Cast(out[i * t_.stageChannels], stage[i * t_.stageChannels], RoundMode::CAST_RINT, staged_);
      Sync<HardEvent::V_MTE3>();
      for (int i = 0; i < 4; ++i)
        if (wanted[i]) DataCopyPad(outGm_[i][stageFirst_], out[i * t_.stageChannels], params);
    }
    Sync<HardEvent::MTE3_S>();  // the stage is written again only after the copy-out
    staged_ = 0;
  }

  // The block's partial sums go to workspace[segment][first .. first + channels][2].
  __aicore__ inline void WritePartials(uint64_t segment, uint64_t first, uint32_t channels) {
    LocalTensor<float> partial = partialBuf_.Get<float>();
    for (uint32_t j = 0; j < 2 * channels; ++j) partial.SetValue(j, sums_[j]);
    Sync<HardEvent::S_MTE3>();
    DataCopyExtParams params(1, channels * 2 * sizeof(float), 0, 0, 0);
    DataCopyPad(partialGm_[(segment * t_.c + first) * 2], partial, params);
    Sync<HardEvent::MTE3_S>();
  }

  // Adds the channel's partials in segment order, whichever core wrote them: one strided
  // copy, each segment's pair landing in its own 32-byte block.
  __aicore__ inline void CombineChannel(uint64_t channel) {
    LocalTensor<float> parts = combineBuf_.Get<float>();
    DataCopyExtParams params(static_cast<uint16_t>(t_.segments), 2 * sizeof(float),
                             static_cast<uint32_t>((t_.c - 1) * 2 * sizeof(float)), 0, 0);
    DataCopyPadExtParams<float> pad(false, 0, 0, 0.0f);
    DataCopyPad(parts, partialGm_[channel * 2], params, pad);
    Sync<HardEvent::MTE2_S>();
    float sumDy = 0.0f, sumDyXmu = 0.0f;
    for (uint32_t k = 0; k < t_.segments; ++k) {
      sumDy += parts.GetValue(8 * k);
      sumDyXmu += parts.GetValue(8 * k + 1);
    }
    Sync<HardEvent::S_MTE2>();
    StageResult(channel, sumDy, sumDyXmu);
  }

  const BatchNormReduceBackwardTilingData& t_;
  TPipe pipe_;
  TQue<QuePosition::VECIN, BUFFER_NUM> dyQue_;
  TQue<QuePosition::VECIN, BUFFER_NUM> xQue_;
  TBuf<TPosition::VECCALC> castBuf_, accBuf_, meanBuf_, reduceTmpBuf_, resultBuf_, stageBuf_, stageOutBuf_, partialBuf_,
      combineBuf_;
  GlobalTensor<T> dyGm_, xGm_;
  GlobalTensor<TStat> meanGm_, invstdGm_;
  GlobalTensor<float> partialGm_;
  GlobalTensor<TOut> outGm_[4];
  uint32_t staged_ = 0;
  uint64_t stageFirst_ = 0;
  float sums_[2 * 256];  // per channel of a block: {Σ dy, Σ dy·(x − mean)} (K <= 256)
};

template <typename T, typename TStat, typename TOut>
__aicore__ inline void Run(const BatchNormReduceBackwardTilingData& tiling, GM_ADDR gradOut, GM_ADDR input,
                           GM_ADDR mean, GM_ADDR invstd, GM_ADDR sumDy, GM_ADDR sumDyXmu, GM_ADDR gradWeight,
                           GM_ADDR gradBias, GM_ADDR workspace) {
  BatchNormReduceBackwardKernel<T, TStat, TOut> op(tiling);
  op.Init(gradOut, input, mean, invstd, sumDy, sumDyXmu, gradWeight, gradBias, workspace);
  op.Process();
}

}  // namespace

// Tiling key = input dtype + 3 * statistics dtype (0 float32, 1 float16, 2 bfloat16); the
// sums are float16 when both are float16 (key 4), float32 otherwise.
#define BN_CASE(key, T, TStat, TOut)                                                                          \
  if (TILING_KEY_IS(key)) {                                                                                   \
    Run<T, TStat, TOut>(tilingData, gradOut, input, mean, invstd, sumDy, sumDyXmu, gradWeight, gradBias,      \
                        workspace);                                                                           \
    return;                                                                                                   \
  }

extern "C" __global__ __aicore__ void ascend_ops_batch_norm_reduce_backward(
    GM_ADDR gradOut, GM_ADDR input, GM_ADDR mean, GM_ADDR invstd, GM_ADDR weight, GM_ADDR sumDy, GM_ADDR sumDyXmu,
    GM_ADDR gradWeight, GM_ADDR gradBias, GM_ADDR workspace, GM_ADDR tiling) {
  REGISTER_TILING_DEFAULT(BatchNormReduceBackwardTilingData);
  GET_TILING_DATA_WITH_STRUCT(BatchNormReduceBackwardTilingData, tilingData, tiling);
  // A vector kernel whose channels split across cores combines them after a hardware
  // SyncAll, which needs the MIX AIV 1:0 kernel type.
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
  (void)weight;  // accepted for signature compatibility; it does not enter the math
  BN_CASE(0, float, float, float)
  BN_CASE(1, half, float, float)
  BN_CASE(2, bfloat16_t, float, float)
  BN_CASE(3, float, half, float)
  BN_CASE(4, half, half, half)
  BN_CASE(5, bfloat16_t, half, float)
  BN_CASE(6, float, bfloat16_t, float)
  BN_CASE(7, half, bfloat16_t, float)
  BN_CASE(8, bfloat16_t, bfloat16_t, float)
}
