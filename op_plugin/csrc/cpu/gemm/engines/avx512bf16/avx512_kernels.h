// The AVX512 kernels of the CPU fast paths (avx512_kernels.cpp): the bfloat16 GEMM and
// logits-gradient pieces of fused_linear_cross_entropy_loss_grad. Call them only when
// avx512_kernels_supported() is true.
//
// The declarations use plain C types on purpose: the implementation file is compiled
// for a newer instruction set than the rest of the library, so it must not share any
// inline or template code (torch or std) with the other files.
//
// Packed layouts (K is cut into pairs; a pair past the end of K is zero):
//   A, MR-row panels:  a[p * kMr + r]   = bits(A(r, 2p)) | bits(A(r, 2p + 1)) << 16
//   B, NR-col panels:  b[p * kNr + j]   = bits(B(2p, j)) | bits(B(2p + 1, j)) << 16
// which is what VDPBF16PS multiplies: one A pair broadcast against NR B pairs.
#pragma once

#include <stdint.h>

namespace ascend_ops {
namespace cpu {

constexpr int64_t kMr = 12;  // micro-tile rows: 12 x 2 zmm accumulators = 24 registers
constexpr int64_t kNr = 32;  // micro-tile columns: two zmm of 16 fp32

// True when this CPU runs AVX512-F/BW/VL/DQ (cpu_features.cpp): the batch-norm loops' build.
// Both are false in a build without the x86 kernels (cpu/isa_builds.h).
bool avx512_core_supported();

// True when it also runs AVX512-BF16: the kernels of this header.
bool avx512_kernels_supported();

// Element (r, c) of a strided bf16 matrix is data[r * row_stride + c * col_stride].
struct Bf16View {
  const uint16_t* data;
  int64_t row_stride;
  int64_t col_stride;
};

// Packs rows [0, rows) x columns [k0, k0 + kc) of A into ceil(rows / kMr) panels of
// ceil(kc / 2) pairs each, zero-filling the missing rows of the last panel. Reads only that
// region (vector loads for a row-major or column-major A).
void pack_a(Bf16View a, int64_t rows, int64_t k0, int64_t kc, uint32_t* out);

// Packs rows [k0, k0 + kc) x columns [0, cols) of B into ceil(cols / kNr) panels of
// ceil(kc / 2) pairs each, zero-filling the missing columns of the last panel.
void pack_b(Bf16View b, int64_t k0, int64_t kc, int64_t cols, uint32_t* out);

// The AMX kernel's A layout (amx_kernels.h): rows [0, rows) x columns [k0, k0 + kc) of A as
// row-major pairs, out[r * pairs_pad + p] = the pair p of row r, for r < round_up(rows,
// row_align) and p < pairs_pad (>= ceil(kc / 2)); everything outside A's region is zero.
// row_align is a multiple of 16. Reads only that region (vector loads for a row-major or
// column-major A).
void pack_a_rows(Bf16View a, int64_t rows, int64_t k0, int64_t kc, int64_t row_align,
                 int64_t pairs_pad, uint32_t* out);

// C[rows, cols] (fp32, leading dimension ldc) = (accumulate ? C : 0) + A @ B over `pairs`
// K pairs, A packed by pack_a and B by pack_b. Every element is summed in K order, then
// added to C.
void gemm_packed(int64_t rows, int64_t cols, int64_t pairs, const uint32_t* a_packed,
                 const uint32_t* b_packed, float* c, int64_t ldc, bool accumulate);

// One row of the logits gradient, rounded to bf16 (round to nearest even):
//   g[j] = bf16((p[j] - (j == target)) * scale)
// with p[j] = exp(src[j] - row_max) * inv_sum when `recompute`, else p[j] = src[j] * inv_sum
// (src the softmax, inv_sum 1: read as it is; or the row's exps exp_sum left, inv_sum
// 1 / their sum: the same bits as recomputing them).
// `target` < 0 or >= cols: no column gets the -1.
void logits_grad_row(const float* src, int64_t cols, bool recompute, float row_max,
                     float inv_sum, float scale, int64_t target, uint16_t* g);

// dst[i] = bf16(src[i]) (round to nearest even), for n elements.
void round_to_bf16(const float* src, int64_t n, uint16_t* dst);

// dst[i] = bf16(bf16 src[i] * scale), for n elements (a cached logits gradient rescaled).
void rescale_bf16(const uint16_t* src, int64_t n, float scale, uint16_t* dst);

// The row statistics of linear_cross_entropy's cached-gradient forward, one row of fp32
// logits at a time: the row maximum, and the sum of exp(row[j] - row_max) (the same exp
// as logits_grad_row) added in fp32 vectors of kExpSumBlock elements, each block's sum
// added to a double in order; with `exps`, each exp is also stored there (exps == row
// allowed: the row is read before it is written).
constexpr int64_t kExpSumBlock = 1024;
float row_max(const float* row, int64_t n);
double exp_sum(const float* row, int64_t n, float row_max, float* exps = nullptr);

}  // namespace cpu
}  // namespace ascend_ops
