#include "packing_buffers.h"

#include "../choice/engine_switch.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace ascend_ops {
namespace cpu {
namespace {

std::atomic<int64_t> kept_bytes_total{0};

int64_t aligned_bytes(int64_t words) {
  return (std::max<int64_t>(words, 1) * 4 + 63) / 64 * 64;
}

uint32_t* allocate(int64_t bytes) {
  auto* data = static_cast<uint32_t*>(std::aligned_alloc(64, bytes));
  TORCH_CHECK(data != nullptr, "GEMM packing: out of memory for ", bytes,
              " bytes of packed operands");
  return data;
}

struct KeptBuffer {
  uint32_t* data = nullptr;
  int64_t bytes = 0;
  bool in_use = false;

  void replace(int64_t new_bytes) {
    uint32_t* fresh = allocate(new_bytes);  // first: a failure leaves the old one kept
    release();
    data = fresh;
    bytes = new_bytes;
    kept_bytes_total += bytes;
  }
  void release() {
    std::free(data);
    kept_bytes_total -= bytes;
    data = nullptr;
    bytes = 0;
  }
  ~KeptBuffer() { release(); }
};

KeptBuffer& thread_buffer(PackingBuffer kind) {
  thread_local KeptBuffer buffers[kPackingBufferKinds];
  return buffers[static_cast<int>(kind)];
}

}  // namespace

PackingWords::PackingWords(PackingBuffer kind, int64_t words) {
  // Read first: a bad value throws before anything is allocated or taken.
  const bool poison = scratch_poison_enabled();
  const int64_t bytes = aligned_bytes(words);
  if (bytes > kMaxKeptPackingBytes) {
    call_only_ = allocate(bytes);
    data_ = call_only_;
  } else {
    KeptBuffer& kept = thread_buffer(kind);
    TORCH_INTERNAL_ASSERT(!kept.in_use, "GEMM packing: buffer ", static_cast<int>(kind),
                          " taken twice on one thread");
    if (kept.bytes < bytes) {
      kept.replace(bytes);
    }
    kept.in_use = true;
    in_use_ = &kept.in_use;
    data_ = kept.data;
  }
  // All ones: NaN as two bf16 halves and as one fp32, so that a packed word the packing
  // did not write (padding rows, the odd K's missing half pair) spoils the result in tests
  // instead of reading zeros a fresh mapping happened to hold.
  if (poison) {
    std::memset(data_, 0xFF, static_cast<size_t>(bytes));
  }
}

PackingWords::~PackingWords() {
  std::free(call_only_);
  if (in_use_ != nullptr) {
    *in_use_ = false;
  }
}

int64_t kept_packing_bytes() { return kept_bytes_total.load(); }

}  // namespace cpu
}  // namespace ascend_ops
