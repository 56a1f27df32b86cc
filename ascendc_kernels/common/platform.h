// Platform facts the host tilings are computed from. The CANN TilingFunc wrappers fill
// this from platform_ascendc::PlatformAscendC; the simulator uses the 910B constants.
#pragma once

#include <cstdint>

namespace ascend_ops_kernels {

struct PlatformFacts {
  uint32_t ubBytes;       // Unified Buffer per vector core
  uint32_t blockBytes;    // DataCopy granule: UB addresses and lengths align to it
  uint32_t repeatBytes;   // one vector instruction repeat
  uint32_t vectorCores;   // AIV cores the launch may use
  uint32_t aiCores;       // AIC (cube) cores
};

// Atlas A2 (910B): 24 AI cores, 1 cube + 2 vector cores each, 192 KiB UB per vector core.
constexpr PlatformFacts kAscend910B{192 * 1024, 32, 256, 48, 24};

constexpr uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
constexpr uint64_t RoundUpTo(uint64_t a, uint64_t b) { return CeilDiv(a, b) * b; }
constexpr uint64_t Min(uint64_t a, uint64_t b) { return a < b ? a : b; }
constexpr uint64_t Max(uint64_t a, uint64_t b) { return a > b ? a : b; }

// Dtype codes shared by tiling keys and the host bindings.
enum DtypeCode : uint32_t { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };
constexpr uint32_t DtypeBytes(uint32_t code) { return code == kFloat32 ? 4 : 2; }

}  // namespace ascend_ops_kernels
