// A bfloat16 GEMM with fp32 output and fp32 accumulation, on the AVX512-BF16 kernels.
#pragma once

#include "avx512_kernels.h"

#include <cstdint>

namespace ascend_ops {
namespace cpu {

// The cache blocking of bf16_gemm, derived from the CPU's cache sizes (cpu_caches.h):
//   kc     K depth of a block: the packed A panel (kMr x kc bf16) fills at most 3/4 of L1
//   mc     rows of a packed A block (mc x kc bf16): at most a quarter of L2 (a core's other
//          hardware thread runs a block of its own)
//   b_panel_bytes  a thread's packed B panel (kc x nc bf16) at most: L3 / 2 shared out
//          between the threads
//   rounded_tile_bytes  bf16_gemm_rounded's column tile of B (k x nt bf16, every K block,
//          shared by the threads) at most: L3 / 4
// On AMD EPYC Zen 4 (L1d 32 KiB, L2 1 MiB, L3 32 MiB): kc 1024, mc 96, 8 MiB at 2 threads,
// 8 MiB.
struct Bf16GemmBlocking {
  int64_t kc;
  int64_t mc;
  int64_t b_panel_bytes;
  int64_t rounded_tile_bytes;
};
Bf16GemmBlocking bf16_gemm_blocking(int threads);

// C[m, n] (fp32, leading dimension ldc) = (accumulate ? C : 0) + A[m, k] @ B[k, n].
// A and B are strided bf16 views, so transposed operands cost nothing extra: they are
// packed block by block either way (only their logical regions are read). K is cut into
// blocks by its length and the L1 size only, each block's products summed in K order and
// added to C in turn, and threads split rows and columns, never K: the result is bitwise
// the same for any thread count on one machine. Requires avx512_kernels_supported().
void bf16_gemm(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, float* c, int64_t ldc,
               bool accumulate);

// out[m, n] (bf16, leading dimension ld_out) = bf16(A @ B): the sums of bf16_gemm, each
// rounded once (to nearest even). Where B packed in at most 4 column tiles of
// rounded_tile_bytes (the weight gradient's short K), each tile is packed once and each
// block of mc rows rounded from a per-thread tile of sums; else a block of rows at a time
// into 16 MiB of fp32 scratch.
void bf16_gemm_rounded(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, uint16_t* out,
                       int64_t ld_out);

// bf16_gemm and bf16_gemm_rounded on AMX tiles (amx_kernels.h): the same blocking of the
// threads' work, with A packed in 32-row panels of row-major pairs, K blocks whole tiles deep
// (the last one zero-padded), K inside each A block (B packed for all of K per panel; the
// running sums kept in per-thread blocked scratch between K blocks) and each 32 x 32 block
// of C summed in four TDPBF16PS accumulators; rounded products always in row blocks. Same
// contract, its own bits (each element's sum starts from C's value, or zero).
// Requires amx_kernels_supported().
void amx_bf16_gemm(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, float* c, int64_t ldc,
                   bool accumulate);
void amx_bf16_gemm_rounded(Bf16View a, Bf16View b, int64_t m, int64_t n, int64_t k, uint16_t* out,
                           int64_t ld_out);

}  // namespace cpu
}  // namespace ascend_ops
