// AMX implementation of amx_kernels.h. Compiled for AMX-TILE/BF16 and AVX512 (the pragma);
// the library calls into it only after amx_kernels_supported() said the CPU and the OS
// allow it. No torch or std C++ headers (avx512_kernels.cpp says why).
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")

#include "amx_kernels.h"

#include "amx_tiles.h"

#include <immintrin.h>
#include <string.h>

namespace ascend_ops {
namespace cpu {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Tiles (amx_tiles.h: all 16 rows x 64 bytes; zero padding stands in for shorter rows and
// K): tmm0-3 the accumulators of a 32 x 32 block of C (16 x 16 fp32 each: rows 0-15 / 16-31
// x columns 0-15 / 16-31), tmm4-5 the two A tiles, tmm6-7 the two B tiles.

// The four accumulators over every K tile of one A panel and one B panel. Tile registers are
// not renamed: a load into a tile waits for the TDPBF16PS still reading it. So each operand
// tile of the next K tile is loaded as soon as its last reader of this one is issued, and the
// loads overlap the remaining products (Intel Xeon with AMX, a loop of this kernel on packed
// operands: 1.20 -> 1.40 TFLOP/s on one thread against loading all four first). Every K
// tile but the last also fetches `fetch_lines` cache lines from `fetch` on into L2.
inline void multiply_block(int64_t pairs, const uint32_t* a, const uint32_t* b, const char* fetch,
                           int64_t fetch_lines) {
  const int64_t a_stride = pairs * 4;
  const int64_t b_stride = kNr * 4;
  const uint32_t* a1 = a + 16 * pairs;
  _tile_loadd(4, a, a_stride);
  _tile_loadd(6, b, b_stride);
  _tile_loadd(7, b + 16, b_stride);
  _tile_loadd(5, a1, a_stride);
  int64_t p = 0;
  for (; p + kAmxTilePairs < pairs; p += kAmxTilePairs) {
    const int64_t q = p + kAmxTilePairs;
    for (int64_t l = 0; l < fetch_lines; ++l) {
      _mm_prefetch(fetch + l * 64, _MM_HINT_T1);
    }
    fetch += fetch_lines * 64;
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(4, a + q, a_stride);
    _tile_dpbf16ps(2, 5, 6);
    _tile_loadd(6, b + q * kNr, b_stride);
    _tile_dpbf16ps(3, 5, 7);
    _tile_loadd(7, b + q * kNr + 16, b_stride);
    _tile_loadd(5, a1 + q, a_stride);
  }
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

}  // namespace

void amx_gemm_packed(int64_t rows, int64_t cols, int64_t pairs, const uint32_t* a_packed,
                     const uint32_t* b_packed, const float* from, int64_t from_ld, float* to,
                     int64_t to_ld) {
  configure_full_tiles();
  const int64_t col_blocks = (cols + kNr - 1) / kNr;
  // A 32 x 32 block of a row-major C that lies partly past its rows or columns goes
  // through this.
  alignas(64) float edge[32 * 32];
  // Column panels outside, row panels inside: the B panel (kNr x K block, 32 KiB at a
  // K block of 512) stays in L1 while the A block's panels stream past it from L2.
  for (int64_t jr = 0; jr < cols; jr += kNr) {
    const uint32_t* bp = b_packed + (jr / kNr) * pairs * kNr;
    const int64_t nr = cols - jr < kNr ? cols - jr : kNr;
    for (int64_t ir = 0; ir < rows; ir += kAmxPanelRows) {
      const uint32_t* ap = a_packed + ir * pairs;
      const int64_t mr = rows - ir < kAmxPanelRows ? rows - ir : kAmxPanelRows;
      const bool whole = mr == kAmxPanelRows && nr == kNr;
      const int64_t block = (ir / kAmxPanelRows) * col_blocks + jr / kNr;
      if (from == nullptr) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      } else {
        const float* src = from_ld == kAmxBlockedSums ? from + block * 1024 : from + ir * from_ld + jr;
        int64_t ld = from_ld == kAmxBlockedSums ? 32 : from_ld;
        if (from_ld != kAmxBlockedSums && !whole) {
          memset(edge, 0, sizeof(edge));
          for (int64_t r = 0; r < mr; ++r) memcpy(edge + r * 32, src + r * from_ld, nr * sizeof(float));
          src = edge;
          ld = 32;
        }
        _tile_loadd(0, src, ld * 4);
        _tile_loadd(1, src + 16, ld * 4);
        _tile_loadd(2, src + 16 * ld, ld * 4);
        _tile_loadd(3, src + 16 * ld + 16, ld * 4);
      }
      // The next B panel is fetched into L2 meanwhile, a share of its lines per row panel
      // (a tile load that misses L2 stalls the products behind it: Intel Xeon with AMX, 2048 x
      // 683 x 4096 on one thread, 0.58-0.74 -> 0.74-0.80 TFLOP/s). A prefetch past the last
      // panel's end is harmless: it never faults.
      const int64_t row_panels = (rows + kAmxPanelRows - 1) / kAmxPanelRows;
      const int64_t panel_lines = pairs * kNr * 4 / 64;
      const int64_t share = (panel_lines + row_panels - 1) / row_panels;
      const int64_t steps = pairs / kAmxTilePairs - 1;
      const int64_t first = (ir / kAmxPanelRows) * share;
      const int64_t lines = jr + kNr < cols && first < panel_lines ? min64(share, panel_lines - first) : 0;
      multiply_block(pairs, ap, bp, reinterpret_cast<const char*>(bp + pairs * kNr) + first * 64,
                     steps > 0 ? (lines + steps - 1) / steps : 0);
      const bool through_edge = to_ld != kAmxBlockedSums && !whole;
      float* dst = to_ld == kAmxBlockedSums ? to + block * 1024 : through_edge ? edge : to + ir * to_ld + jr;
      const int64_t ld = to_ld == kAmxBlockedSums || through_edge ? 32 : to_ld;
      _tile_stored(0, dst, ld * 4);
      _tile_stored(1, dst + 16, ld * 4);
      _tile_stored(2, dst + 16 * ld, ld * 4);
      _tile_stored(3, dst + 16 * ld + 16, ld * 4);
      if (through_edge) {
        for (int64_t r = 0; r < mr; ++r) memcpy(to + (ir + r) * to_ld + jr, edge + r * 32, nr * sizeof(float));
      }
    }
  }
  _tile_release();
}

}  // namespace cpu
}  // namespace ascend_ops
