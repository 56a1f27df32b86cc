// The one description of the hardware: the host tilings, the simulator (its UB size,
// alignment, core count) and the cost model and scripts/sim_report.py (the rates, read
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
};

// Atlas A2 (910B1/910B2) and A3 (Ascend910_93): 24 AI cores, 1 cube + 2 vector cores each,
// 192 KiB UB per vector core, L1 512 KiB, L0A/L0B 64 KiB, L0C 128 KiB per cube core,
// 192 MiB L2: CANN's platform tables (data/platform_config/Ascend910B1.ini, Ascend910B2.ini,
// [SoCInfo] ai_core_cnt = 24, l2_size = 201326592; [AICoreSpec] ub_size, l1_size,
// l0_a/b/c_size). The 20-core 910B3/910B4 (96 MiB L2 on the 910B4) are not modelled.
constexpr PlatformFacts kAscend910B{192 * 1024, 32,         256,        48, 24,
                                    512 * 1024, 64 * 1024,  64 * 1024,  128 * 1024,
                                    0,          192ull * 1024 * 1024};

// The chip's rates, for the cost model only (sim/host/flce_model.cpp, scripts/sim_report.py;
// no tiling reads them): the public sources give ranges, not one number, so there are two
// sets, the fast and the slow end, and the model reports a time and a ratio for each.
struct ChipRates {
  double clockHz;              // the cube's and vector cores' clock
  double hbmBytesPerS;         // HBM, all cores, reads and writes together
  double l2ReadBytesPerS;      // L2, all cores
  double l2WriteBytesPerS;
  double ndFillBytesPerCycle;  // one cube core's Matmul L1 fill from an ND matrix (the ND->NZ DataCopy)
  double nzFillBytesPerCycle;  // ... from a matrix already in NZ (a contiguous copy)
  double drainBytesPerCycle;   // one cube core's fixpipe, L0C -> GM
  double l1ToL0BytesPerCycle;  // one cube core's L1 -> L0A/L0B
  uint32_t l2PortsShared;      // 1: L2 reads and writes take turns (their times add); 0: each its own port
  uint32_t drainOverlapsFill;  // 1: a Matmul call's fixpipe drain overlaps the next call's first L1 fill
};

// A cube core: 16 x 16 x 16 multiply-adds a cycle on fp16/bf16 (CANN's platform tables,
// [AICoreSpec] cube_m/n/k_size = 16; [DtypeMKN] Default = 16,16,16), 2 FLOPs each.
constexpr double kCubeFlopsPerCycle = 2.0 * 16 * 16 * 16;
// A vector core: one 256-byte repeat a cycle ([AICoreSpec] vec_calc_size = 128 fp16 lanes).
constexpr double kVectorRepeatsPerCycle = 1.0;

// The fast end. Clock 1.85 GHz: Ascend910B1.ini cube_freq = 1850. HBM 1.64 TB/s: the four
// HBM2e stacks of 16 GiB (memory_size = 64 GiB) at JEDEC JESD235's top pin rate, 3.2 Gb/s x
// 1024 bits = 409.6 GB/s a stack, an upper bound. L2: [AICoreMemoryRates] l2_read_rate = 110
// and l2_write_rate = 86 bytes a cycle per core, x 24 cores (4.88 and 3.82 TB/s), each on its
// own port. Fills at the core's L2 read port (110 B/cycle) whatever the layout, drains at its
// write port (86), L1 -> L0 at l1_to_l0_a_rate = 512; a drain overlaps the next call's fill.
constexpr ChipRates kA2RatesFast{1.85e9, 1.6384e12, 110.0 * 24 * 1.85e9, 86.0 * 24 * 1.85e9,
                                 110.0, 110.0, 86.0, 512.0, 0, 1};
// The slow end. Clock 1.80 GHz: Ascend910_9382.ini (A3) cube_freq = 1800. HBM 1.38 TB/s: the
// tables' ddr_rate = 32 bytes a cycle per core x 24 cores. L2 as above at 1.80 GHz (4.75 and
// 3.72 TB/s), reads and writes taking turns. An ND fill at the Matmul library's measured GM
// -> L1 rate with one 128 x 256 x 64 base block a fill (CFG_NORM, as ours): 2491 GB/s over
// 20 cores (AscendC guide, "Matmul算子优化Tiling策略", 3.10.4.2: aic_mte2 808 us), 124.6 GB/s
// = 69.2 bytes a cycle per core at 1.80 GHz; an NZ fill at the port rate; drains and L1 -> L0
// as above, a drain serialised before the next call's fill (dbL0C = 1 in every tiling CANN
// returns for these calls, so the next call's first mmad waits for it either way).
constexpr ChipRates kA2RatesSlow{1.80e9, 32.0 * 24 * 1.80e9, 110.0 * 24 * 1.80e9, 86.0 * 24 * 1.80e9,
                                 2491e9 / 20 / 1.80e9, 110.0, 86.0, 512.0, 1, 0};

constexpr uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
constexpr uint64_t RoundUpTo(uint64_t a, uint64_t b) { return CeilDiv(a, b) * b; }
constexpr uint64_t Min(uint64_t a, uint64_t b) { return a < b ? a : b; }
constexpr uint64_t Max(uint64_t a, uint64_t b) { return a > b ? a : b; }

// Dtype codes shared by tiling keys and the host bindings.
enum DtypeCode : uint32_t { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };
constexpr uint32_t DtypeBytes(uint32_t code) { return code == kFloat32 ? 4 : 2; }

}  // namespace ascend_ops_kernels
