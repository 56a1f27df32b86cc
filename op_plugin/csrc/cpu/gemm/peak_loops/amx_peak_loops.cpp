// The AMX loops of peak_loops.h: TDPBF16PS on tiles loaded once (register-only), and on
// operand tiles loaded from L1 as the kernel loads them. Compiled for
// AMX-TILE/BF16 (the pragma) and called only where the CPU has AMX-BF16 and Linux granted
// the tile state (amx_tiles_granted): Intel Sapphire Rapids class CPUs and later (run on an
// Intel Xeon with AMX on 2026-12-05; built and type-checked on the AMD EPYC machines).
#pragma GCC target("amx-tile,amx-bf16")

#include "peak_loops.h"

#include "../engines/amx/amx_tiles.h"

#include <immintrin.h>
#include <string.h>

namespace ascend_ops {
namespace cpu {

float tdpbf16ps_loop(int64_t iterations) {
  configure_full_tiles();
  alignas(64) uint16_t ones[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) ones[i] = 0x3f80;  // bf16 1.0
  alignas(64) float zero[16 * 16] = {};
  // Accumulators tmm0-3, A tiles tmm4-5, B tiles tmm6-7: four independent chains.
  _tile_loadd(0, zero, 64);
  _tile_loadd(1, zero, 64);
  _tile_loadd(2, zero, 64);
  _tile_loadd(3, zero, 64);
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  for (int64_t it = 0; it < iterations; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

float tdpbf16ps_from_l1_loop(int64_t iterations) {
  configure_full_tiles();
  // amx_kernels.cpp's operands over kSteps K tiles: a 32-row A panel of row-major pairs (its
  // tiles 16 rows x 16 pairs, rows kSteps * 64 bytes apart) and a 32-column B panel (tiles
  // 16 pairs x 16 columns, 128 bytes apart), 16 KiB in all: in L1 after the first pass.
  constexpr int64_t kSteps = 4;
  constexpr int64_t kPairs = kSteps * 16;
  alignas(64) uint32_t a[32 * kPairs];
  alignas(64) uint32_t b[kPairs * 32];
  for (int64_t i = 0; i < 32 * kPairs; ++i) a[i] = b[i] = 0x3f803f80u;  // bf16 pairs (1, 1)
  const uint32_t* a1 = a + 16 * kPairs;
  const int64_t a_stride = kPairs * 4;
  const int64_t b_stride = 32 * 4;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, a_stride);
  _tile_loadd(6, b, b_stride);
  _tile_loadd(7, b + 16, b_stride);
  _tile_loadd(5, a1, a_stride);
  // One iteration is one K tile: four products, and the next K tile's four operand tiles
  // loaded in multiply_block's order (each as soon as its last reader is issued).
  for (int64_t it = 0, step = 0; it < iterations; ++it) {
    step = step + 1 == kSteps ? 0 : step + 1;
    const int64_t q = step * 16;  // the next K tile's first pair
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(4, a + q, a_stride);
    _tile_dpbf16ps(2, 5, 6);
    _tile_loadd(6, b + q * 32, b_stride);
    _tile_dpbf16ps(3, 5, 7);
    _tile_loadd(7, b + q * 32 + 16, b_stride);
    _tile_loadd(5, a1 + q, a_stride);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

}  // namespace cpu
}  // namespace ascend_ops
