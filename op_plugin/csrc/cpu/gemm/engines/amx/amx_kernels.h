// The AMX kernel of the CPU fast paths (amx_kernels.cpp): the bfloat16 GEMM's multiply on
// TDPBF16PS tiles. Call it only when amx_kernels_supported() is true. Plain C types, as in
// avx512_kernels.h: the implementation file is compiled for AMX.
//
// Packed layouts (K is cut into pairs as in avx512_kernels.h; pairs past the end of K are
// zero, and every K block is padded to a whole number of tiles' depth, kAmxTilePairs):
//   A, row-major pairs (pack_a_rows):  a[r * pairs + p], rows padded to kAmxPanelRows
//   B, kNr-column panels (pack_b):     b[p * kNr + j] per panel, `pairs` pairs each
// An A tile is 16 rows x 16 pairs of the first (64-byte rows, stride pairs words); a B tile
// is 16 pairs x 16 columns of the second (stride kNr words): TDPBF16PS's operand layouts.
#pragma once

#include "../avx512bf16/avx512_kernels.h"

#include <stdint.h>

namespace ascend_ops {
namespace cpu {

constexpr int64_t kAmxTilePairs = 16;  // K pairs per tile: 64 bytes per row
constexpr int64_t kAmxPanelRows = 32;  // rows per A panel: two tiles of 16

// True when this CPU runs AMX-BF16, Linux granted the tile state (amx_tiles_granted) and
// AVX512-BF16 packs the operands.
bool amx_kernels_supported();
// Whether the CPU has AMX-BF16 and AMX-TILE (CPUID leaf 7).
bool amx_bf16_supported();
// Whether this thread may use AMX tiles: asks Linux for the tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM) once per process. False without AMX-BF16.
bool amx_tiles_granted();
// (The three are answered in ../cpu_features.cpp, on every build: no on a build without the
// x86 kernels.)

// Sums in whole 32 x 32 blocks, each 4 KiB contiguous (rows of 32 fp32), block (i, j) of a
// rows x cols product at (i * ceil(cols / 32) + j) * 1024: a leading dimension of this value
// names that layout. The running sums between K blocks are kept so: a row-major C whose rows
// lie a power of two apart puts a block's 32 rows in a few cache sets, and the kernel ran at
// half the speed when it loaded and stored its sums there (Intel Xeon with AMX, L2 2 MiB).
constexpr int64_t kAmxBlockedSums = 0;

// to[rows, cols] = from + A @ B over `pairs` K pairs (a multiple of kAmxTilePairs), A packed
// by pack_a_rows (row_align kAmxPanelRows, pairs_pad = pairs) and B by pack_b with `pairs`
// pairs per panel. `from` is null (zero), or fp32 sums of leading dimension from_ld (row-major,
// or kAmxBlockedSums); `to` likewise (it may be `from`). Each 32 x 32 block is four tile
// accumulators that start from `from` and take the K tiles in order.
void amx_gemm_packed(int64_t rows, int64_t cols, int64_t pairs, const uint32_t* a_packed,
                     const uint32_t* b_packed, const float* from, int64_t from_ld, float* to,
                     int64_t to_ld);

}  // namespace cpu
}  // namespace ascend_ops
