// The one description of the hardware: the host tilings, the simulator (its UB size,
// alignment, core count) and scripts/sim_report.py (bandwidth, peak, clock, L2, read
// from the simulator library) all take their facts from here. The CANN TilingFunc
// wrappers start from kAscend910B and overwrite what platform_ascendc::PlatformAscendC
// reports for the actual chip (UB size, core counts).
#pragma once

#include <cstdint>

namespace ascend_ops_kernels {

struct PlatformFacts {
  uint32_t ubBytes;       // Unified Buffer per vector core
  uint32_t blockBytes;    // DataCopy granule: UB addresses and lengths align to it
  uint32_t repeatBytes;   // one vector instruction repeat
  uint32_t vectorCores;   // AIV cores the launch may use
  uint32_t aiCores;       // AIC (cube) cores
  // Cube core buffers (the Matmul API's capacity rules, checked by the simulator):
  uint32_t l1Bytes;
  uint32_t l0aBytes;
  uint32_t l0bBytes;
  uint32_t l0cBytes;
  uint32_t reserved;      // keeps the 64-bit fields below 8-byte aligned on every ABI
  uint64_t l2Bytes;       // L2 cache shared by all cores
  // Modelling assumptions of the report (scripts/sim_report.py), not read by any tiling:
  double hbmBytesPerS;    // HBM bandwidth
  double cubeFlopsPerS;   // cube peak, fp16/bf16 inputs, fp32 accumulation
  double vectorClockHz;   // one 256-byte vector repeat per cycle per vector core
  double l2BytesPerS;     // L2 bandwidth, reads and writes mixed
};

// Atlas A2 (910B): 24 AI cores, 1 cube + 2 vector cores each, 192 KiB UB per vector
// core, L1 512 KiB, L0A/L0B 64 KiB, L0C 128 KiB per cube core, 192 MB L2 (AscendC
// documentation, with L2 at about 7 TB/s reads and writes mixed); HBM 1.6 TB/s,
// 313 TFLOP/s and 1.85 GHz are the report's stated assumptions.
constexpr PlatformFacts kAscend910B{192 * 1024, 32,         256,         48, 24,
                                    512 * 1024, 64 * 1024,  64 * 1024,   128 * 1024,
                                    0,          192ull * 1024 * 1024,    1.6e12, 313e12, 1.85e9, 7e12};

constexpr uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
constexpr uint64_t RoundUpTo(uint64_t a, uint64_t b) { return CeilDiv(a, b) * b; }
constexpr uint64_t Min(uint64_t a, uint64_t b) { return a < b ? a : b; }
constexpr uint64_t Max(uint64_t a, uint64_t b) { return a > b ? a : b; }

// Dtype codes shared by tiling keys and the host bindings.
enum DtypeCode : uint32_t { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };
constexpr uint32_t DtypeBytes(uint32_t code) { return code == kFloat32 ? 4 : 2; }

}  // namespace ascend_ops_kernels
