// The own GEMMs' packing buffers, kept by each thread from one call to the next.
//
// Why kept: a buffer allocated per call is new memory on every call wherever the allocator
// maps large blocks afresh (glibc above its mmap threshold, which is 32 MiB at most by
// default and 64 KiB in the benchmark's timing worker, scripts/worker_processes.py), and
// then each of its 4 KiB pages takes a fault inside the GEMM. A thread's B panel is 8 MiB
// on AMD EPYC Zen 4 at 2 threads; faulting it in once per row chunk held the logits at
// 0.80-0.82 of the VDPBF16PS peak in that worker, 0.85-0.86 kept (docs/cpu_kernels.md).
#pragma once

#include <cstdint>

namespace ascend_ops {
namespace cpu {

// What a buffer holds; each thread keeps one buffer of each.
enum class PackingBuffer { kBPanel, kABlock, kSums, kBTile };
constexpr int kPackingBufferKinds = 4;

// A request above this is allocated for the call only and freed at its end, so that one
// outsized product does not leave a thread holding its buffers for good.
constexpr int64_t kMaxKeptPackingBytes = 16LL << 20;

// `words` 32-bit words, 64-byte aligned (a zmm load never splits a line), uninitialised or
// holding what an earlier call left (all ones, NaN, under ASCEND_OPS_CPU_POISON_SCRATCH=1):
// the caller packs before it reads. The calling thread's
// kept buffer of `kind`, grown to fit where needed, for the lifetime of this object; two
// live objects of one kind on one thread are a bug (checked).
class PackingWords {
 public:
  PackingWords(PackingBuffer kind, int64_t words);
  ~PackingWords();
  PackingWords(const PackingWords&) = delete;
  PackingWords& operator=(const PackingWords&) = delete;
  uint32_t* data() const { return data_; }

 private:
  uint32_t* data_ = nullptr;
  uint32_t* call_only_ = nullptr;  // a request above kMaxKeptPackingBytes
  bool* in_use_ = nullptr;         // the kept buffer's lease flag
};

// Bytes of packing buffers all threads keep now (each at most kPackingBufferKinds *
// kMaxKeptPackingBytes); they go back when their thread ends.
int64_t kept_packing_bytes();

}  // namespace cpu
}  // namespace ascend_ops
