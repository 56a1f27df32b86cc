// The GEMM layer of the CPU kernels: every product of fused_linear_cross_entropy_loss_grad,
// fused_linear_online_max_sum and linear_cross_entropy's gradient cache goes through gemm()
// below (or gemm_rounded(), its half-output form for a K complete in one product), which
// computes
//
//   C (fp32) = [C +] A @ B,   A [m, k] and B [k, n] half-precision values
//
// with SPEC §1's numerics: the products of the half values are exact in fp32, they are
// accumulated in fp32, and C is fp32. Six engines can do that:
//
//   onednn      ATen's GEMM on fp32 copies of the operands with oneDNN told to compute
//               in bf16 (exact: the values are bf16), which runs oneDNN's AMX or
//               AVX512-BF16 kernels; its rounded products are oneDNN's bf16-in/bf16-out
//               GEMM on the operands in place (engines/onednn.h); bf16 operands only.
//   mkl         MKL's cblas_gemm_bf16bf16f32 (engines/mkl_gemm.h) on the bf16 operands in
//               place, fp32 out; its rounded products are that, rounded once per row
//               block; where libtorch_cpu exports it; bf16 operands only.
//   amx         the project's own GEMM on AMX tiles (engines/avx512bf16/bf16_gemm.h:
//               amx_bf16_gemm, with the kernel of engines/amx/) where the CPU has AMX-BF16
//               and Linux grants the tile state, reading the bf16 operands in place; bf16
//               operands only.
//   avx512bf16  the project's own GEMM (engines/avx512bf16/bf16_gemm.h) on CPUs with
//               AVX512-BF16, reading the bf16 operands in place; bf16 operands only.
//   avx2        the project's own GEMM for AVX2 + FMA (engines/avx2/avx2_gemm.h), reading
//               the bf16 operands in place and widening them block by block as it packs
//               them; bf16 operands only.
//   portable    ATen's fp32 GEMM (IEEE) on fp32 copies (engines/portable.h); any CPU,
//               bf16 and float16.
//
// The two kinds of product (GemmKind: fp32-out gemm(), rounded gemm_rounded()) each take
// their own engine for bf16: the fastest measured for that kind (gemm_engine(),
// choice/engine_choice.h), or the one ASCEND_OPS_CPU_GEMM / ASCEND_OPS_CPU_GEMM_FP32_OUT /
// _ROUNDED forces (choice/engine_switch.h). On an Intel Xeon with AMX, mkl is the fastest
// fp32-out engine (no fp32 copies) and onednn the fastest rounded one. Operands may be views
// of any strides; oneDNN, MKL and ATen are handed only dense or zero-padded ones
// (operands/gemm_operands.h), the own GEMM reads the logical region. Each engine sums every
// element in an order fixed by the shape and the thread count: results are reproducible for
// a given engine and thread count (mkl: as MKL makes them, for operands at the same
// addresses modulo its alignment).
//
// This folder, by concern: engines/ (amx/, avx512bf16/ and avx2/ hold each instruction
// set's kernels, GEMM and row kernels alike, compiled for x86-64 only; onednn, mkl_gemm and
// portable wrap the GEMMs torch ships; cpu_features says which of them this CPU runs),
// choice/ (the environment switches, the choice by measurement and its cache file),
// operands/ (the operand contract and the memory the products use: packing buffers, kept
// step buffers), peak_loops/ (each instruction's ceiling on this CPU); here, this interface
// and its dispatch (gemm.cpp), bf16_matrix (the row helpers the kernels share) and
// cpu_caches.
#pragma once

#include "choice/engine_choice.h"
#include "choice/engine_switch.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace ascend_ops {
namespace cpu {

// Reusable fp32 room for the widened copies of a loop's successive operand blocks (a
// weight's vocabulary blocks, say). A fresh fp32 copy per block maps and faults in new
// pages wherever the allocator gives large blocks back to the system (glibc above its
// mmap threshold): 4096 faults per 16 MiB block, ~1.5 µs each on an AMD EPYC VM, which at
// (4096, 4096, 16000) came to ~1.7 s of a training step on `portable`. One buffer per loop
// faults once.
class WideningBuffer {
 public:
  explicit WideningBuffer(int64_t elements) : elements_(elements) {}
  // A buffer in memory the caller lends: `room` is a 1-D fp32 tensor (a view of storage
  // that is free until the caller writes it, such as an output not yet computed).
  explicit WideningBuffer(at::Tensor room);
  // fp32 copy of `half` (2-D, at most `elements` values), dense in `half`'s own order:
  // row-major, or column-major for a transposed view (which BLAS reads in place). Valid
  // until the next call. A room not lent is allocated on the first call (scratch_empty).
  at::Tensor widen(const at::Tensor& half);

 private:
  int64_t elements_;
  at::Tensor room_;
};

// A matrix operand: a 2-D half view (any strides), or the transpose of one. Its fp32 copy,
// which the onednn and portable engines multiply, is made on first need and shared by the
// operand and its transpose, so an operand used by two GEMMs is widened once.
class GemmOperand {
 public:
  explicit GemmOperand(at::Tensor matrix);
  // The fp32 copy, when needed, goes into `buffer` (which must outlive this operand's use;
  // its next widen() overwrites the copy, so one buffer serves one operand at a time).
  GemmOperand(at::Tensor matrix, WideningBuffer* buffer);
  GemmOperand t() const;  // the transpose, sharing the fp32 copy
  at::Tensor half() const;
  at::Tensor widened() const;  // fp32, made once
  bool is_widened() const;     // whether that copy exists already
  int64_t rows() const { return half().size(0); }
  int64_t cols() const { return half().size(1); }

 private:
  struct Storage {
    at::Tensor matrix;
    at::Tensor f32;
    WideningBuffer* buffer = nullptr;
  };
  std::shared_ptr<Storage> storage_;
  bool transposed_ = false;
};

// C = [C +] A @ B on `engine` (one that engine_usable() accepts for A's dtype). C is an
// fp32 [m, n] view whose rows may be strided but whose columns are contiguous.
void gemm(const GemmOperand& a, const GemmOperand& b, at::Tensor& c, bool accumulate,
          GemmEngine engine);

// out = half(A @ B) on `engine`: the fp32 sums of gemm() rounded once to out's dtype (A's),
// for a product whose K is complete in one call. `out` is a half [m, n] view with
// contiguous rows. No fp32 [m, n] is held on avx512bf16 (per-thread row chunks) nor on
// avx2 (row blocks of 16 MiB of fp32 sums) nor on onednn (oneDNN's bf16 GEMM writes bf16
// from its fp32 accumulators, on the operands in place when dense or zero-padded, else on
// a dense copy) nor on mkl (row blocks of 16 MiB of fp32 sums) nor on portable (fp32 products of row and K blocks of the operands, at
// most 48 MiB of scratch, rounded per row block).
void gemm_rounded(const GemmOperand& a, const GemmOperand& b, at::Tensor& out, GemmEngine engine);

// Whether `engine` multiplies the half operands as they lie (amx, avx512bf16, avx2, mkl): no
// fp32 copy of an operand is made, so callers need not block their operands to bound such
// copies.
bool reads_half_in_place(GemmEngine engine);

// Whether `engine` is one of the own GEMMs (amx, avx512bf16, avx2), whose rounded products of a
// transposed A run fastest from a row-major copy of it (the kernels make one).
bool is_own_gemm(GemmEngine engine);

// Engines that run bf16 GEMMs on this CPU (portable always).
std::vector<GemmEngine> available_gemm_engines();

// Whether `engine` meets SPEC's numerics for `dtype` on this CPU.
bool engine_usable(GemmEngine engine, at::ScalarType dtype);

}  // namespace cpu
}  // namespace ascend_ops
