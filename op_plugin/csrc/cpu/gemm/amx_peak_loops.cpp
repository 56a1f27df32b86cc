// The AMX register-only loop of peak_loops.h: TDPBF16PS on tiles loaded once. Compiled for
// AMX-TILE/BF16 (the pragma) and called only where the CPU has AMX-BF16 and Linux granted
// the tile state (amx_tiles_granted): Intel Sapphire Rapids class CPUs and later (run on an
// Intel Xeon with AMX on 2026-12-05; built and type-checked on the AMD EPYC machines).
#pragma GCC target("amx-tile,amx-bf16")

#include "peak_loops.h"

#include "amx_tiles.h"

#include <cpuid.h>
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ascend_ops {
namespace cpu {
namespace {

// Linux's arch_prctl request for a dynamically enabled state component, and AMX's tile data
// component (arch/x86/include/uapi/asm/prctl.h; XFEATURE_XTILEDATA = 18).
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

}  // namespace

bool amx_bf16_supported() {
  // CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE (Intel SDM).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx >> 22 & 1) && (edx >> 24 & 1);
}

bool amx_tiles_granted() {
  static const bool granted = amx_bf16_supported() &&
                              syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return granted;
}

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

}  // namespace cpu
}  // namespace ascend_ops
