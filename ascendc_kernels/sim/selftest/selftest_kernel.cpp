// A small kernel (y = 2·x over 64 floats per block) that can be told to break exactly one
// simulator rule, on one block only. The strictness tests run it with each bug and check
// that the simulator stops with a message naming the kernel, the block and the call;
// with no bug it must run clean, so a test cannot pass by the simulator rejecting all.
#include <cstdio>
#include <string>
#include <vector>

#include "kernel_operator.h"

using namespace AscendC;

namespace {

enum Bug : int32_t {
  kNone = 0,
  kUbOverflow,         // InitBuffer beyond the core's 192 KiB
  kUnalignedCopy,      // DataCopy of 7 floats (28 bytes)
  kQueueDepth,         // a third AllocTensor from a queue with two buffers
  kReadBeforeDeque,    // vector op on a VECIN tensor that was never EnQue'd/DeQue'd
  kReadAfterFree,      // vector op on a tensor after FreeTensor
  kMissingFree,        // AllocTensor without FreeTensor at kernel end
  kGmOutOfBounds,      // copy-in past the end of x
  kCountTooLarge,      // Muls with a count beyond the operand
  kWaitWithoutSet,     // WaitFlag that no SetFlag matches
  kCopyOutBeforeDeque, // DataCopy out of a VECOUT tensor still owned by the vector pipe
  kUnalignedUb,        // vector operand at a UB address that is not 32-byte aligned
  kEnQueFull,          // a second EnQue on a depth-1 queue before any DeQue
  kPadTooWide,         // DataCopyPad with 36 bytes of right padding
  kWideningRound,      // Cast half -> float with a round mode
};

constexpr uint32_t kElems = 64;

class ScaleKernel {
 public:
  __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, int32_t bug) {
    const int64_t block = GetBlockIdx();
    bug_ = block == GetBlockNum() - 1 ? bug : kNone;  // only the last block misbehaves
    xGm_.SetGlobalBuffer((__gm__ float*)x + block * kElems, kElems);
    yGm_.SetGlobalBuffer((__gm__ float*)y + block * kElems, kElems);
    pipe_.InitBuffer(inQue_, 2, kElems * sizeof(float));
    pipe_.InitBuffer(outQue_, 2, kElems * sizeof(float));
    if (bug_ == kUbOverflow) pipe_.InitBuffer(extra_, 192 * 1024);
    if (bug_ == kEnQueFull) pipe_.InitBuffer(shallowQue_, 2, kElems * sizeof(float));
    if (bug_ == kWideningRound) pipe_.InitBuffer(extra_, kElems * sizeof(half));
  }

  __aicore__ inline void Process() {
    LocalTensor<float> in = inQue_.AllocTensor<float>();
    if (bug_ == kGmOutOfBounds) {
      GlobalTensor<float> all;
      all.SetGlobalBuffer(xGm_.GetPhyAddr(), kElems);
      DataCopy(in, all[8], kElems);
    } else {
      DataCopy(in, xGm_, bug_ == kUnalignedCopy ? 7 : kElems);
    }
    if (bug_ == kEnQueFull) {
      LocalTensor<float> a = shallowQue_.AllocTensor<float>();
      LocalTensor<float> b = shallowQue_.AllocTensor<float>();
      shallowQue_.EnQue(a);
      shallowQue_.EnQue(b);
    }
    if (bug_ == kPadTooWide) {
      DataCopyExtParams params(1, 28, 0, 0, 0);
      DataCopyPadExtParams<float> pad(true, 0, 9, 0.0f);
      DataCopyPad(in, xGm_, params, pad);
    }
    if (bug_ == kQueueDepth) {
      LocalTensor<float> second = inQue_.AllocTensor<float>();
      LocalTensor<float> third = inQue_.AllocTensor<float>();
      (void)second; (void)third;
    }
    LocalTensor<float> out = outQue_.AllocTensor<float>();
    if (bug_ == kReadBeforeDeque) {
      Muls(out, in, 2.0f, kElems);
    }
    inQue_.EnQue(in);
    LocalTensor<float> ready = inQue_.DeQue<float>();
    if (bug_ == kUnalignedUb) {
      Muls(out[1], ready[1], 2.0f, kElems - 8);
    }
    if (bug_ == kWideningRound) Cast(out, extra_.Get<half>(), RoundMode::CAST_RINT, kElems);
    Muls(out, ready, 2.0f, bug_ == kCountTooLarge ? kElems + 8 : kElems);
    inQue_.FreeTensor(ready);
    if (bug_ == kReadAfterFree) Muls(out, ready, 2.0f, kElems);
    if (bug_ == kWaitWithoutSet) WaitFlag<HardEvent::V_MTE3>(1);
    if (bug_ == kCopyOutBeforeDeque) {
      DataCopy(yGm_, out, kElems);
    }
    outQue_.EnQue(out);
    LocalTensor<float> result = outQue_.DeQue<float>();
    DataCopy(yGm_, result, kElems);
    if (bug_ != kMissingFree) outQue_.FreeTensor(result);
  }

 private:
  int32_t bug_ = kNone;
  TPipe pipe_;
  TQue<QuePosition::VECIN, 2> inQue_;
  TQue<QuePosition::VECOUT, 2> outQue_;
  TQue<QuePosition::VECIN, 1> shallowQue_;
  TBuf<TPosition::VECCALC> extra_;
  GlobalTensor<float> xGm_, yGm_;
};

}  // namespace

extern "C" __global__ __aicore__ void selftest_scale(GM_ADDR x, GM_ADDR y, GM_ADDR bug) {
  ScaleKernel op;
  op.Init(x, y, *reinterpret_cast<int32_t*>(bug));
  op.Process();
}

extern "C" const char* asim_last_error();

// Runs selftest_scale on `blocks` blocks with `bug`; y = 2·x when it passes. Also a check
// that SyncAll is a real barrier is in asim_run_selftest_syncall.
extern "C" int asim_run_selftest_kernel(int32_t bug, uint32_t blocks, const float* x, float* y, char* error,
                                        uint64_t error_bytes) {
  int32_t bug_value = bug;
  const uint64_t bytes = uint64_t(blocks) * kElems * sizeof(float);
  sim::NextLaunch() = sim::LaunchArgs{0, {{reinterpret_cast<const uint8_t*>(x), bytes, "x"},
                                          {reinterpret_cast<const uint8_t*>(y), bytes, "y"}}};
  try {
    ICPU_RUN_KF(selftest_scale, blocks, (GM_ADDR)x, (GM_ADDR)y, (GM_ADDR)&bug_value);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_bytes, "%s", e.what());
    return 1;
  }
}

// Every block writes its index, SyncAll, then reads its neighbour's: without a barrier
// some block would read an unwritten slot.
extern "C" __global__ __aicore__ void selftest_syncall(GM_ADDR slots, GM_ADDR seen, GM_ADDR skipLast) {
  if (*reinterpret_cast<int32_t*>(skipLast) && GetBlockIdx() == GetBlockNum() - 1) return;  // the bug
  GlobalTensor<int32_t> slot;
  GlobalTensor<int32_t> out;
  slot.SetGlobalBuffer((__gm__ int32_t*)slots, GetBlockNum());
  out.SetGlobalBuffer((__gm__ int32_t*)seen, GetBlockNum());
  const int64_t b = GetBlockIdx();
  slot.SetValue(b, static_cast<int32_t>(b) + 1);
  SyncAll();
  out.SetValue(b, slot.GetValue((b + 1) % GetBlockNum()));
}

extern "C" int asim_run_selftest_syncall(uint32_t blocks, int32_t* slots, int32_t* seen, int32_t skip_last,
                                         char* error, uint64_t error_bytes) {
  sim::NextLaunch() = sim::LaunchArgs{0, {{reinterpret_cast<const uint8_t*>(slots), blocks * 4ull, "slots"},
                                          {reinterpret_cast<const uint8_t*>(seen), blocks * 4ull, "seen"}}};
  try {
    ICPU_RUN_KF(selftest_syncall, blocks, (GM_ADDR)slots, (GM_ADDR)seen, (GM_ADDR)&skip_last);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_bytes, "%s", e.what());
    return 1;
  }
}
