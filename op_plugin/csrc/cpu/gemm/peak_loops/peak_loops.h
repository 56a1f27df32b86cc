// Register-only loops of the instructions the GEMM engines multiply with: the ceiling a GEMM
// on this CPU can reach, measured on it (scripts/benchmark_gemm_peak.py prints each GEMM's
// fraction of it). Each loop runs independent accumulator chains (enough to cover the
// instruction's latency) on constant operands held in registers: no memory is touched.
// Beside each instruction an own kernel multiplies with, a `_from_l1` loop runs that kernel's
// inner loop on operands loaded from L1 in its packed layout (vdpbf16ps_zmm_from_l1: the
// avx512bf16 micro-kernel, tdpbf16ps_from_l1: the amx kernel, vfmadd231ps_ymm_from_l1: the
// avx2 one): what a GEMM that loads its operands can reach at best, so its fraction of the
// register-only loop is the most that kernel can show on this CPU.
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

// One loop: the instruction it repeats, the floating-point operations per iteration, and
// the function that runs it (one of those below).
struct PeakLoop {
  using Run = float (*)(int64_t iterations);
  // "vdpbf16ps_zmm", "tdpbf16ps", "vfmadd231ps_zmm", "vfmadd231ps_ymm", and the `_from_l1`
  // loops of the first, second and fourth
  std::string instruction;
  double flops_per_iteration;
  Run run;
};

// The loops this CPU can run, each with its `_from_l1` twin where it has one:
// vdpbf16ps_zmm (AVX512-BF16), tdpbf16ps (AMX-BF16, where Linux grants the tile state),
// vfmadd231ps_zmm (AVX512-F), vfmadd231ps_ymm (AVX2 + FMA).
std::vector<PeakLoop> available_peak_loops();

// Wall seconds of `iterations` iterations of `instruction`'s loop on each of the kernels'
// threads (at::get_num_threads()) at once. ValueError for an instruction this CPU cannot run.
double time_peak_loop(const std::string& instruction, int64_t iterations);

// The ISA-specific loops (plain C types: their files are compiled for other instruction
// sets). Each returns a value of its sums, so that the loop is not optimised away.
// 12 chains of VDPBF16PS zmm (16 fp32 lanes x 2 bf16 products: 64 flops each).
float vdpbf16ps_zmm_loop(int64_t iterations);
// The avx512bf16 micro-kernel's 12 x 2 accumulators, each iteration one K pair of its packed
// panels in L1: 24 VDPBF16PS (1536 flops).
float vdpbf16ps_zmm_from_l1_loop(int64_t iterations);
// 12 chains of VFMADD231PS zmm (32 flops each).
float vfmadd231ps_zmm_loop(int64_t iterations);
// 12 chains of VFMADD231PS ymm (16 flops each).
float vfmadd231ps_ymm_loop(int64_t iterations);
// The avx2 micro-kernel's 6 x 2 accumulators, each iteration one K step of its packed panels
// in L1: 12 VFMADD231PS ymm (192 flops).
float vfmadd231ps_ymm_from_l1_loop(int64_t iterations);
// 4 tile accumulators of TDPBF16PS (16 x 16 fp32, K 32 bf16: 16384 flops each).
float tdpbf16ps_loop(int64_t iterations);
// The same four accumulators, each iteration one K tile: its four operand tiles loaded from a
// 16 KiB block in L1, interleaved with the products as amx_kernels.cpp interleaves them.
float tdpbf16ps_from_l1_loop(int64_t iterations);

}  // namespace cpu
}  // namespace ascend_ops
