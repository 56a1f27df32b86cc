// The simulator's stand-in for CANN's kernel_operator.h: kernels include this file by
// that name and compile unchanged against either.
#pragma once

#include <cstring>

#include "sim_copy.h"
#include "sim_cross_core.h"
#include "sim_dtypes.h"
#include "sim_runtime.h"
#include "sim_sync.h"
#include "sim_tensor.h"
#include "sim_vector.h"
#include "sim_workspace.h"

// Tiling data declared as a standard C++ struct (CANN: REGISTER_TILING_DEFAULT +
// GET_TILING_DATA_WITH_STRUCT).
#define REGISTER_TILING_DEFAULT(StructType)
#define GET_TILING_DATA_WITH_STRUCT(StructType, var, tiling) \
  StructType var;                                            \
  std::memcpy(&var, (tiling), sizeof(StructType))
#define TILING_KEY_IS(key) (sim::CurrentTilingKey() == static_cast<uint64_t>(key))

// CANN's CPU debug launcher: run `kernel(args...)` on blockDim blocks, each in a thread.
#define ICPU_RUN_KF(kernel, blockDim, ...) \
  sim::RunKernel(#kernel, (blockDim), [&] { kernel(__VA_ARGS__); })

namespace sim {

struct LaunchArgs {
  uint64_t tiling_key = 0;
  std::vector<GmRegion> regions;
  SocSpec platform = Soc910B();          // the platform the host tiled for (core count included)
  LaunchKind kind = LaunchKind::Vector;  // MixAic1To2: blockDim AIC + 2 x blockDim AIV cores
  Schedule schedule{};                   // thread and atomic-add order; run twice and compare (sim_runtime.h)
};
LaunchArgs& NextLaunch();  // what the host sets before ICPU_RUN_KF

inline LaunchCounters RunKernel(const char* name, uint32_t block_dim, const std::function<void()>& body) {
  LaunchArgs args = NextLaunch();
  NextLaunch() = LaunchArgs{};
  return RunBlocks(name, block_dim, args.tiling_key, args.regions, body, args.platform, args.kind, args.schedule);
}

}  // namespace sim
