#include "kept_scratch.h"

#include "../choice/engine_switch.h"
#include "gemm_operands.h"

#include <ATen/ops/from_blob.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/accumulate.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <mutex>

namespace ascend_ops {
namespace cpu {
namespace {

struct Slot {
  void* data = nullptr;
  int64_t bytes = 0;
  bool handed_out = false;
  bool free_when_back = false;  // release_kept_scratch() came while it was handed out
};

struct Slots {
  std::mutex mutex;
  Slot slot[kKeptScratchBlocks];
};

// Never destroyed: a tensor on a kept block may die after static destruction began.
Slots& slots() {
  static Slots* all = new Slots();
  return *all;
}

void give_back(KeptScratch block, void* data) {
  Slots& all = slots();
  std::lock_guard<std::mutex> lock(all.mutex);
  Slot& slot = all.slot[static_cast<int>(block)];
  if (slot.data != data) {
    // Not the slot's block: cannot happen (a slot changes its block only while nothing holds
    // it), and a deleter cannot throw, so such a block would be freed rather than abort.
    std::free(data);
    return;
  }
  slot.handed_out = false;
  if (slot.free_when_back) {
    std::free(slot.data);
    slot = Slot();
  }
}

}  // namespace

at::Tensor kept_scratch_empty(KeptScratch block, at::IntArrayRef sizes,
                              const at::TensorOptions& options, int64_t keep_at_most) {
  const bool poison = scratch_poison_enabled();  // a bad value throws before a block is taken
  const int64_t numel = c10::multiply_integers(sizes);
  const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(options.dtype().toScalarType()));
  if (numel == 0 || bytes > keep_at_most) {
    return scratch_empty(sizes, options);
  }
  void* data = nullptr;
  {
    Slots& all = slots();
    std::lock_guard<std::mutex> lock(all.mutex);
    Slot& slot = all.slot[static_cast<int>(block)];
    if (slot.handed_out) {
      return scratch_empty(sizes, options);
    }
    if (slot.bytes < bytes) {
      // An eighth more than asked, within what may be kept: the rows of a step (those whose
      // target is not ignored) vary from batch to batch, and pages never written stay unmapped.
      const int64_t grown = (std::min(keep_at_most, bytes + bytes / 8) + 63) / 64 * 64;
      void* fresh = std::aligned_alloc(64, static_cast<size_t>(grown));
      TORCH_CHECK(fresh != nullptr, "CPU scratch: out of memory for ", grown, " bytes");
      std::free(slot.data);
      slot.data = fresh;
      slot.bytes = grown;
    }
    slot.handed_out = true;
    data = slot.data;
  }
  // Resizable as torch.empty's storage is (the weight gradient is the caller's tensor): a
  // resize past the block moves the tensor to the CPU allocator's memory and gives the block back.
  at::Tensor t = at::for_blob(data, sizes)
                     .deleter([block](void* p) { give_back(block, p); })
                     .options(options.device(at::kCPU))
                     .resizeable_storage()
                     .allocator(c10::GetCPUAllocator())
                     .make_tensor();
  if (poison && at::isFloatingType(t.scalar_type())) {
    t.fill_(std::numeric_limits<double>::quiet_NaN());
  }
  return t;
}

int64_t kept_scratch_bytes() {
  Slots& all = slots();
  std::lock_guard<std::mutex> lock(all.mutex);
  int64_t total = 0;
  for (const Slot& slot : all.slot) {
    total += slot.bytes;
  }
  return total;
}

void release_kept_scratch() {
  Slots& all = slots();
  std::lock_guard<std::mutex> lock(all.mutex);
  for (Slot& slot : all.slot) {
    if (slot.handed_out) {
      slot.free_when_back = true;
    } else {
      std::free(slot.data);
      slot = Slot();
    }
  }
}

}  // namespace cpu
}  // namespace ascend_ops
