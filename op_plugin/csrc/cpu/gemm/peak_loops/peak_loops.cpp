#include "peak_loops.h"

#include "../../isa_builds.h"
#include "../engines/amx/amx_kernels.h"
#include "../engines/avx2/avx2_kernels.h"
#include "../engines/avx512bf16/avx512_kernels.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>

namespace ascend_ops {
namespace cpu {
namespace {

// flops per loop iteration: 12 chains x (16 lanes x 2 bf16 products x 2), (16 x 2), (8 x 2);
// AMX: 4 tiles x 16 x 16 fp32 sums of 32 bf16 products x 2.
constexpr double kVdpbf16psFlops = 12 * 64.0;
constexpr double kFmaZmmFlops = 12 * 32.0;
constexpr double kFmaYmmFlops = 12 * 16.0;
constexpr double kTdpbf16psFlops = 4 * 16 * 16 * 32 * 2.0;
// The micro-kernels' K steps (peak_loops.h): 12 x 2 VDPBF16PS zmm, 6 x 2 VFMADD231PS ymm.
constexpr double kVdpbf16psFromL1Flops = 24 * 64.0;
constexpr double kFmaYmmFromL1Flops = 12 * 16.0;

PeakLoop::Run loop_of(const std::string& instruction) {
  for (const PeakLoop& loop : available_peak_loops()) {
    if (loop.instruction == instruction) return loop.run;
  }
  std::string names;
  for (const PeakLoop& loop : available_peak_loops()) {
    names += (names.empty() ? "" : ", ") + loop.instruction;
  }
  TORCH_CHECK_VALUE(false, "peak loop: 'instruction' must be one this CPU runs (", names, "), got '",
                    instruction, "'");
}

}  // namespace

std::vector<PeakLoop> available_peak_loops() {
  std::vector<PeakLoop> loops;
#if ASCEND_OPS_X86_KERNELS  // the loops' files are x86 builds (peak_loops.h)
  if (avx512_kernels_supported()) {
    loops.push_back({"vdpbf16ps_zmm", kVdpbf16psFlops, vdpbf16ps_zmm_loop});
    loops.push_back({"vdpbf16ps_zmm_from_l1", kVdpbf16psFromL1Flops, vdpbf16ps_zmm_from_l1_loop});
  }
  if (amx_tiles_granted()) {
    loops.push_back({"tdpbf16ps", kTdpbf16psFlops, tdpbf16ps_loop});
    loops.push_back({"tdpbf16ps_from_l1", kTdpbf16psFlops, tdpbf16ps_from_l1_loop});
  }
  if (avx512_core_supported()) {
    loops.push_back({"vfmadd231ps_zmm", kFmaZmmFlops, vfmadd231ps_zmm_loop});
  }
  if (avx2_kernels_supported()) {
    loops.push_back({"vfmadd231ps_ymm", kFmaYmmFlops, vfmadd231ps_ymm_loop});
    loops.push_back({"vfmadd231ps_ymm_from_l1", kFmaYmmFromL1Flops, vfmadd231ps_ymm_from_l1_loop});
  }
#endif
  return loops;
}

double time_peak_loop(const std::string& instruction, int64_t iterations) {
  const PeakLoop::Run loop = loop_of(instruction);
  TORCH_CHECK_VALUE(iterations >= 0, "peak loop: 'iterations' must be >= 0, got ", iterations);
  // One loop per thread, all at once: at::parallel_for hands each of its threads one index
  // of a range as long as the thread count.
  const int threads = std::max(1, at::get_num_threads());
  std::vector<float> sink(static_cast<size_t>(threads));
  const auto start = std::chrono::steady_clock::now();
  at::parallel_for(0, threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) sink[static_cast<size_t>(t)] = loop(iterations);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  volatile float keep = sink[0];
  (void)keep;
  return seconds;
}

}  // namespace cpu
}  // namespace ascend_ops
