// A small kernel (y = 2·x over 64 floats per block) that can be told to break exactly one
// simulator rule, on one block only. The strictness tests run it with each bug and check
// that the simulator stops with a message naming the kernel, the block and the call;
// with no bug it must run clean, so a test cannot pass by the simulator rejecting all.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernel_operator.h"

using namespace AscendC;

namespace {

enum Bug : int32_t {
  kNone = 0,
  kUbOverflow,         // InitBuffer of the whole UB on top of the queues
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
  // The TBuf round trip below (x -> TBuf -> x2 -> scalar touch -> y) without one flag:
  kTbufNoMte2V,        // vector reads what MTE2 copied in
  kTbufNoVS,           // scalar reads what the vector pipe wrote
  kTbufNoSMte3,        // MTE3 copies out what the scalar unit wrote
  kTbufNoVMte3,        // MTE3 copies out what the vector pipe wrote
  kHardCodedEventId,   // SetFlag/WaitFlag with a literal event ID in a TPipe kernel
  kBf16Arithmetic,     // Muls on bfloat16_t operands (A2/A3: half or float only)
  kDoubleScalar,       // Muls of a float tensor by a double
  kPartialOverlap,     // Muls with dst 32 bytes into its source
  kReduceSumScratch,   // ReduceSum of 64 floats with a 4-element sharedTmpBuffer (needs 8)
  kAllocWithoutRelease,  // AllocEventID with no ReleaseEventID before the kernel ends
  kStaleFetchedId,     // one FetchEventID answer used for two SetFlags
  kInitBufferNum100,   // InitBuffer(que, 100, 32): num beyond QBUF_MAX_LEN = 64 (rule B)
  kBuffersPastPipeMax, // 60 more buffers on a TPipe that already manages 5: 65 > 64 (rule B)
  kNineEnqueued,       // nine VECIN tensors enqueued at once: 8 event IDs of MTE2_V (rule C)
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
    if (bug_ == kUbOverflow) pipe_.InitBuffer(extra_, ascend_ops_kernels::kAscend910B.ubBytes);
    if (bug_ == kEnQueFull) pipe_.InitBuffer(shallowQue_, 2, kElems * sizeof(float));
    if (bug_ == kWideningRound || bug_ == kBf16Arithmetic || bug_ == kReduceSumScratch)
      pipe_.InitBuffer(extra_, kElems * sizeof(float));
    pipe_.InitBuffer(scratch_, kElems * sizeof(float));
    if (bug_ == kInitBufferNum100) pipe_.InitBuffer(manyQue_, 100, 32);
    if (bug_ == kBuffersPastPipeMax) pipe_.InitBuffer(manyQue_, 60, 32);
    if (bug_ == kNineEnqueued) pipe_.InitBuffer(nineQue_, 9, 32);
  }

  // Nine tensors of one VECIN queue enqueued at once: each EnQue holds an MTE2_V event
  // ID until its DeQue, and there are eight.
  __aicore__ inline void EnqueueNine() {
    LocalTensor<float> held[9];
    for (int i = 0; i < 9; ++i) {
      held[i] = nineQue_.AllocTensor<float>();
      nineQue_.EnQue(held[i]);
    }
  }

  __aicore__ inline void Process() {
    if (bug_ == kNineEnqueued) EnqueueNine();
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
    if (bug_ == kBf16Arithmetic) {
      LocalTensor<bfloat16_t> b = extra_.Get<bfloat16_t>();
      Muls(b, b, bfloat16_t(2.0f), kElems);
    }
    if (bug_ == kDoubleScalar) Muls(out, ready, 2.0, kElems);
    if (bug_ == kPartialOverlap) Muls(out[8], out, 2.0f, 16);
    if (bug_ == kReduceSumScratch) ReduceSum(out, ready, extra_.Get<float>(4), kElems);
    if (bug_ == kStaleFetchedId) {
      const TEventID id = GetTPipePtr()->FetchEventID(HardEvent::V_S);
      for (int i = 0; i < 2; ++i) {
        SetFlag<HardEvent::V_S>(id);
        WaitFlag<HardEvent::V_S>(id);
      }
    }
    if (bug_ == kHardCodedEventId) {
      SetFlag<HardEvent::V_S>(0);
      WaitFlag<HardEvent::V_S>(0);
    }
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
    TBufRoundTrip();
  }

  // y = 2·x again through a TBuf, touched by all four pipes: every hand-over needs its flag.
  __aicore__ inline void TBufRoundTrip() {
    LocalTensor<float> t = scratch_.Get<float>();
    DataCopy(t, xGm_, kElems);
    if (bug_ != kTbufNoMte2V) Sync<HardEvent::MTE2_V>();
    Muls(t, t, 2.0f, kElems);
    if (bug_ == kTbufNoVMte3) {
      DataCopy(yGm_, t, kElems);
      return;
    }
    if (bug_ != kTbufNoVS) {  // an allocated event ID this time, released after use
      const TEventID id = GetTPipePtr()->AllocEventID<HardEvent::V_S>();
      SetFlag<HardEvent::V_S>(id);
      WaitFlag<HardEvent::V_S>(id);
      if (bug_ != kAllocWithoutRelease) GetTPipePtr()->ReleaseEventID<HardEvent::V_S>(id);
    }
    t.SetValue(0, t.GetValue(0) + 0.0f);
    if (bug_ != kTbufNoSMte3) Sync<HardEvent::S_MTE3>();
    DataCopy(yGm_, t, kElems);
  }

  template <HardEvent event>
  __aicore__ inline void Sync() {
    const TEventID id = GetTPipePtr()->FetchEventID(event);
    SetFlag<event>(id);
    WaitFlag<event>(id);
  }

 private:
  int32_t bug_ = kNone;
  TPipe pipe_;
  TQue<QuePosition::VECIN, 2> inQue_;
  TQue<QuePosition::VECOUT, 2> outQue_;
  TQue<QuePosition::VECIN, 1> shallowQue_, manyQue_;
  TQue<QuePosition::VECIN, 9> nineQue_;
  TBuf<TPosition::VECCALC> extra_, scratch_;
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
// some block would read an unwritten slot. Bugs: 1 the last block returns before SyncAll,
// 2 no kernel type declared (a hardware SyncAll needs KERNEL_TYPE_MIX_AIV_1_0). A slot is
// a 64-byte data-cache line of its own, written with SetValue and cleaned at once: the
// scalar store reaches GM only then, and a line shared with another core's slot would be
// written back whole over it (rules A and E).
constexpr uint32_t kSlotInts = 16;  // one 64-byte line per slot

extern "C" __global__ __aicore__ void selftest_syncall(GM_ADDR slots, GM_ADDR seen, GM_ADDR bugArg) {
  const int32_t bug = *reinterpret_cast<int32_t*>(bugArg);
  if (bug != 2) KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
  if (bug == 1 && GetBlockIdx() == GetBlockNum() - 1) return;
  GlobalTensor<int32_t> slot;
  GlobalTensor<int32_t> out;
  slot.SetGlobalBuffer((__gm__ int32_t*)slots, GetBlockNum() * kSlotInts);
  out.SetGlobalBuffer((__gm__ int32_t*)seen, GetBlockNum() * kSlotInts);
  const int64_t b = GetBlockIdx();
  slot.SetValue(b * kSlotInts, static_cast<int32_t>(b) + 1);
  DataCacheCleanAndInvalid<int32_t, CacheLine::SINGLE_CACHE_LINE, DcciDst::CACHELINE_OUT>(slot[b * kSlotInts]);
  SyncAll();
  out.SetValue(b * kSlotInts, slot.GetValue((b + 1) % GetBlockNum() * kSlotInts));
  DataCacheCleanAndInvalid<int32_t, CacheLine::SINGLE_CACHE_LINE, DcciDst::CACHELINE_OUT>(out[b * kSlotInts]);
}

namespace {

// 64-byte aligned host buffers standing in for GM whose lines the kernels own one each.
struct LineBuffer {
  explicit LineBuffer(uint64_t bytes) : data(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))) {
    std::memset(data, 0, (bytes + 63) / 64 * 64);
  }
  ~LineBuffer() { std::free(data); }
  LineBuffer(const LineBuffer&) = delete;
  uint8_t* data;
};

}  // namespace

extern "C" int asim_run_selftest_syncall(uint32_t blocks, int32_t* slots, int32_t* seen, int32_t bug,
                                         char* error, uint64_t error_bytes) {
  const uint64_t bytes = uint64_t(blocks) * kSlotInts * 4;
  LineBuffer slot_gm(bytes), seen_gm(bytes);
  sim::NextLaunch() = sim::LaunchArgs{0, {{slot_gm.data, bytes, "slots"}, {seen_gm.data, bytes, "seen"}}};
  try {
    ICPU_RUN_KF(selftest_syncall, blocks, (GM_ADDR)slot_gm.data, (GM_ADDR)seen_gm.data, (GM_ADDR)&bug);
  } catch (const std::exception& e) {
    std::snprintf(error, error_bytes, "%s", e.what());
    return 1;
  }
  for (uint32_t b = 0; b < blocks; ++b) {
    slots[b] = reinterpret_cast<int32_t*>(slot_gm.data)[b * kSlotInts];
    seen[b] = reinterpret_cast<int32_t*>(seen_gm.data)[b * kSlotInts];
  }
  return 0;
}

// Casts n floats to half on one block (UB -> UB with Cast, CAST_RINT): what the hardware
// stores, saturation included.
extern "C" __global__ __aicore__ void selftest_cast(GM_ADDR x, GM_ADDR y, GM_ADDR countArg) {
  const uint32_t n = *reinterpret_cast<uint32_t*>(countArg);
  GlobalTensor<float> xGm;
  GlobalTensor<half> yGm;
  xGm.SetGlobalBuffer((__gm__ float*)x, n);
  yGm.SetGlobalBuffer((__gm__ half*)y, n);
  TPipe pipe;
  TQue<QuePosition::VECIN, 1> in;
  TQue<QuePosition::VECOUT, 1> out;
  pipe.InitBuffer(in, 1, n * sizeof(float));
  pipe.InitBuffer(out, 1, n * sizeof(half));
  LocalTensor<float> a = in.AllocTensor<float>();
  DataCopy(a, xGm, n);
  in.EnQue(a);
  LocalTensor<float> b = in.DeQue<float>();
  LocalTensor<half> h = out.AllocTensor<half>();
  Cast(h, b, RoundMode::CAST_RINT, n);
  out.EnQue(h);
  in.FreeTensor(b);
  LocalTensor<half> r = out.DeQue<half>();
  DataCopy(yGm, r, n);
  out.FreeTensor(r);
}

// n must be a multiple of 16 (whole 32-byte blocks of half).
extern "C" int asim_run_selftest_cast(uint32_t n, const float* x, uint16_t* y, char* error, uint64_t error_bytes) {
  uint32_t count = n;
  sim::NextLaunch() = sim::LaunchArgs{0, {{reinterpret_cast<const uint8_t*>(x), n * 4ull, "x"},
                                          {reinterpret_cast<const uint8_t*>(y), n * 2ull, "y"}}};
  try {
    ICPU_RUN_KF(selftest_cast, 1, (GM_ADDR)x, (GM_ADDR)y, (GM_ADDR)&count);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_bytes, "%s", e.what());
    return 1;
  }
}

// Rule G, the vector pipe's own order: y = (x + 1)·2 over 64 floats on one block, each step
// in place on one UB buffer, with the two steps ordered by `order`:
//   0 PipeBarrier<PIPE_V> (clean)            1 nothing: Muls reads what Adds wrote (RAW)
//   2 nothing, Duplicate overwrites what a Muls still reads (WAR: y = 2(x + 1) from a copy)
//   3 nothing, two Duplicates write the same bytes (WAW)
//   4 SetFlag/WaitFlag V_S then S_V, a scalar read between (clean: CANN's ComputeV1 form)
//   5 SetFlag/WaitFlag<HardEvent::V_V> (clean)
// `autoSync`: the launch stands for a kernel built with bisheng's --cce-auto-sync.
namespace {

enum VectorOrder : int32_t { kBarrier = 0, kRaw, kWar, kWaw, kThroughScalar, kVectorFlag };

class VectorOrderKernel {
 public:
  __aicore__ inline void Run(GM_ADDR x, GM_ADDR y, int32_t order) {
    GlobalTensor<float> xGm, yGm;
    xGm.SetGlobalBuffer((__gm__ float*)x, kElems);
    yGm.SetGlobalBuffer((__gm__ float*)y, kElems);
    pipe_.InitBuffer(a_, kElems * sizeof(float));
    pipe_.InitBuffer(b_, kElems * sizeof(float));
    LocalTensor<float> t = a_.Get<float>(), u = b_.Get<float>();
    DataCopy(t, xGm, kElems);
    Sync<HardEvent::MTE2_V>();
    Adds(t, t, 1.0f, kElems);
    if (order == kBarrier) PipeBarrier<PIPE_V>();
    if (order == kThroughScalar) {
      Sync<HardEvent::V_S>();
      (void)t.GetValue(0);
      Sync<HardEvent::S_V>();
    }
    if (order == kVectorFlag) Sync<HardEvent::V_V>();
    if (order == kWar) PipeBarrier<PIPE_V>();  // the RAW is ordered; the WAR below is not
    if (order == kWaw) PipeBarrier<PIPE_V>();
    Muls(u, t, 2.0f, kElems);
    if (order == kWar) Duplicate(t, 0.0f, kElems);  // overwrites Muls' source, no barrier
    if (order == kWaw) {
      PipeBarrier<PIPE_V>();  // Muls has read t: only the two writes are left unordered
      Duplicate(t, 0.0f, kElems);
      Duplicate(t, 1.0f, kElems);
    }
    Sync<HardEvent::V_MTE3>();
    DataCopy(yGm, u, kElems);
  }

 private:
  template <HardEvent event>
  __aicore__ inline void Sync() {
    const TEventID id = GetTPipePtr()->FetchEventID(event);
    SetFlag<event>(id);
    WaitFlag<event>(id);
  }

  TPipe pipe_;
  TBuf<TPosition::VECCALC> a_, b_;
};

}  // namespace

extern "C" __global__ __aicore__ void selftest_vector_order(GM_ADDR x, GM_ADDR y, GM_ADDR orderArg) {
  VectorOrderKernel op;
  op.Run(x, y, *reinterpret_cast<int32_t*>(orderArg));
}

extern "C" int asim_run_selftest_vector_order(int32_t order, int32_t auto_sync, const float* x, float* y,
                                              char* error, uint64_t error_bytes) {
  int32_t order_value = order;
  sim::NextLaunch() = sim::LaunchArgs{0,
                                      {{reinterpret_cast<const uint8_t*>(x), kElems * 4ull, "x"},
                                       {reinterpret_cast<const uint8_t*>(y), kElems * 4ull, "y"}},
                                      sim::Soc910B(),
                                      sim::LaunchKind::Vector,
                                      sim::Schedule{sim::kDefaultSeed, false, auto_sync != 0}};
  try {
    ICPU_RUN_KF(selftest_vector_order, 1, (GM_ADDR)x, (GM_ADDR)y, (GM_ADDR)&order_value);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_bytes, "%s", e.what());
    return 1;
  }
}
