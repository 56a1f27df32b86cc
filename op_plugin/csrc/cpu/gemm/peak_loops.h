// Register-only loops of the instructions the GEMM engines multiply with: the ceiling a GEMM
// on this CPU can reach, measured on it (scripts/benchmark_gemm_peak.py prints each GEMM's
// fraction of it). Each loop runs independent accumulator chains (enough to cover the
// instruction's latency) on constant operands held in registers: no memory is touched.
//
// The loops live in the ISA-specific files (avx512_peak_loops.cpp, avx2_peak_loops.cpp,
// amx_peak_loops.cpp), compiled for their instruction sets and called only where the CPU
// (and, for AMX, the OS) allows; peak_loops.cpp runs them on the kernels' threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ascend_ops {
namespace cpu {

// One loop: the instruction it repeats, and the floating-point operations per iteration.
struct PeakLoop {
  std::string instruction;  // "vdpbf16ps_zmm", "tdpbf16ps", "vfmadd231ps_zmm", "vfmadd231ps_ymm"
  double flops_per_iteration;
};

// The loops this CPU can run: vdpbf16ps_zmm (AVX512-BF16), tdpbf16ps (AMX-BF16, where Linux
// grants the tile state), vfmadd231ps_zmm (AVX512-F), vfmadd231ps_ymm (AVX2 + FMA).
std::vector<PeakLoop> available_peak_loops();

// Wall seconds of `iterations` iterations of `instruction`'s loop on each of the kernels'
// threads (at::get_num_threads()) at once. ValueError for an instruction this CPU cannot run.
double time_peak_loop(const std::string& instruction, int64_t iterations);

// The ISA-specific loops (plain C types: their files are compiled for other instruction
// sets). Each returns a value of its sums, so that the loop is not optimised away.
// 12 chains of VDPBF16PS zmm (16 fp32 lanes x 2 bf16 products: 64 flops each).
float vdpbf16ps_zmm_loop(int64_t iterations);
// 12 chains of VFMADD231PS zmm (32 flops each).
float vfmadd231ps_zmm_loop(int64_t iterations);
// 12 chains of VFMADD231PS ymm (16 flops each).
float vfmadd231ps_ymm_loop(int64_t iterations);
// 4 tile accumulators of TDPBF16PS (16 x 16 fp32, K 32 bf16: 16384 flops each).
float tdpbf16ps_loop(int64_t iterations);
// Whether the CPU has AMX-BF16 and AMX-TILE (CPUID leaf 7).
bool amx_bf16_supported();
// Whether this thread may use AMX tiles: asks Linux for the tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM) once per process. False without AMX-BF16.
bool amx_tiles_granted();

}  // namespace cpu
}  // namespace ascend_ops
