// A small vector kernel for the rules of global memory between cores, which can be told
// to break one of them. With no bug: each block marks its own 64-byte line of `marks`
// with a scalar store (GlobalTensor::SetValue) and cleans it (DataCacheCleanAndInvalid),
// SyncAll, then copies its neighbour's line in (DMA) and writes twice it to its own line
// of `out`. Rules (tests/test_ascendc_sim.py):
//   A: a DMA reads a line a core (another, or its own) wrote with SetValue and did not
//      clean (the value is still in that core's data cache);
//   E: a DMA writes into a line another core holds dirty in its data cache (that line's
//      write-back, all 64 bytes, would overwrite it);
//   D: two blocks write the same output bytes with nothing ordering them.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernel_operator.h"

using namespace AscendC;

namespace {

enum GmBug : int32_t {
  kNone = 0,
  kDmaReadsUncleanedLine,  // A: the last block skips its clean; its neighbour copies the line in
  kDmaWritesDirtyLine,     // E: the last block SetValues into block 0's out line; block 0 copies out over it
  kTwoBlocksOneOutput,     // D: the last block writes block 0's out line too
  kDmaReadsOwnLine,        // A: every block copies its own line in; the last one skipped its clean
};

constexpr uint32_t kLineFloats = 16;  // one 64-byte data-cache line

}  // namespace

extern "C" __global__ __aicore__ void selftest_gm(GM_ADDR marks, GM_ADDR out, GM_ADDR bugArg) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
  const int32_t bug = *reinterpret_cast<int32_t*>(bugArg);
  const int64_t b = GetBlockIdx(), n = GetBlockNum();
  const bool last = b == n - 1;
  GlobalTensor<float> markGm, outGm;
  markGm.SetGlobalBuffer((__gm__ float*)marks, n * kLineFloats);
  outGm.SetGlobalBuffer((__gm__ float*)out, n * kLineFloats);
  TPipe pipe;
  TQue<QuePosition::VECIN, 1> inQue;
  TQue<QuePosition::VECOUT, 1> outQue;
  pipe.InitBuffer(inQue, 1, kLineFloats * sizeof(float));
  pipe.InitBuffer(outQue, 1, kLineFloats * sizeof(float));

  markGm.SetValue(b * kLineFloats, static_cast<float>(b + 1));
  if (!(last && (bug == kDmaReadsUncleanedLine || bug == kDmaReadsOwnLine)))
    DataCacheCleanAndInvalid<float, CacheLine::SINGLE_CACHE_LINE, DcciDst::CACHELINE_OUT>(markGm[b * kLineFloats]);
  if (last && bug == kDmaWritesDirtyLine) outGm.SetValue(kLineFloats - 1, -1.0f);  // not cleaned
  SyncAll();

  LocalTensor<float> x = inQue.AllocTensor<float>();
  const int64_t source = bug == kDmaReadsOwnLine ? b : (b + 1) % n;
  DataCopy(x, markGm[source * kLineFloats], kLineFloats);
  inQue.EnQue(x);
  x = inQue.DeQue<float>();
  LocalTensor<float> y = outQue.AllocTensor<float>();
  Muls(y, x, 2.0f, kLineFloats);
  outQue.EnQue(y);
  inQue.FreeTensor(x);
  y = outQue.DeQue<float>();
  const int64_t line = last && bug == kTwoBlocksOneOutput ? 0 : b;
  DataCopy(outGm[line * kLineFloats], y, kLineFloats);
  outQue.FreeTensor(y);
}

// Runs selftest_gm on `blocks` blocks with `bug`; `seen[b]` is the first element of block
// b's out line (2 x its neighbour's mark when clean). The GM is 64-byte aligned, so each
// block's lines are its own.
extern "C" int asim_run_selftest_gm(int32_t bug, uint32_t blocks, float* seen, char* error, uint64_t error_bytes) {
  const uint64_t bytes = uint64_t(blocks) * kLineFloats * sizeof(float);
  auto* marks = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  auto* out = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  std::memset(marks, 0, bytes);
  std::memset(out, 0, bytes);
  int status = 0;
  sim::NextLaunch() = sim::LaunchArgs{0, {{marks, bytes, "marks"}, {out, bytes, "out"}}};
  try {
    ICPU_RUN_KF(selftest_gm, blocks, (GM_ADDR)marks, (GM_ADDR)out, (GM_ADDR)&bug);
    for (uint32_t b = 0; b < blocks; ++b) seen[b] = reinterpret_cast<float*>(out)[b * kLineFloats];
  } catch (const std::exception& e) {
    std::snprintf(error, error_bytes, "%s", e.what());
    status = 1;
  }
  std::free(marks);
  std::free(out);
  return status;
}
