// Large buffers of linear_cross_entropy's CPU training step, kept from one step to the next.
//
// Why kept: glibc maps a block above its mmap threshold (32 MiB at most by default) afresh
// and unmaps it when freed, so a buffer allocated per step takes a page fault per 4 KiB page
// on every step. At (2048, 2048, 16384) the step's gradient cache (BT x V bf16, 55 MiB for
// the 1755 rows kept), its fp32 logits chunk (36 MiB) and the weight gradient it returns
// (V x H bf16, 64 MiB) cost 60-74 of its 343 ms that way on an Intel Xeon with AMX
// (docs/cpu_kernels.md, "Kept step buffers").
//
// Two blocks, process-wide: the gradient cache's, which lives from the forward to the
// backward, and one for the forward's logits chunk, which is dead before the backward
// begins, and then for the weight gradient the backward returns. That one is the caller's
// tensor: the block comes back once the caller drops it (optimizer.zero_grad()), in time
// for the next forward. Sharing it keeps the logits chunk out of the backward's peak and
// the memory kept between steps at the gradient cache plus the larger of the two.
//
// A request takes its block where it is free and large enough, grows it where it is free
// and too small, and is served by a plain scratch_empty() where the block is taken (two
// forwards before one backward, a gradient the caller still holds) or the request exceeds
// what the caller allows to be kept. The block goes back when the tensor's storage dies.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ascend_ops {
namespace cpu {

enum class KeptScratch { kLceGradCache, kLceLogitsOrWeightGrad };
constexpr int kKeptScratchBlocks = 2;

// scratch_empty(sizes, options) (NaN-filled under ASCEND_OPS_CPU_POISON_SCRATCH=1, each time
// it is handed out) in kept `block` when the request needs at most
// `keep_at_most` bytes, else in memory of its own.
at::Tensor kept_scratch_empty(KeptScratch block, at::IntArrayRef sizes,
                              const at::TensorOptions& options, int64_t keep_at_most);

// Bytes the kept blocks hold now, handed out or not.
int64_t kept_scratch_bytes();

// Frees every block not handed out now; a block in use is freed when its tensor dies.
void release_kept_scratch();

}  // namespace cpu
}  // namespace ascend_ops
