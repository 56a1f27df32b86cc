// The engine choice of the GEMM layer (gemm.h), per kind of product: what the environment
// forces (engine_switch.h), else the fastest engine measured on this CPU, decided once per
// process and kept per CPU in the engine cache file (engine_cache.h).
#pragma once

#include "engine_switch.h"

#include <c10/core/ScalarType.h>

#include <functional>
#include <optional>
#include <vector>

namespace ascend_ops {
namespace cpu {

// One engine's speed on a kind's representative product.
struct EngineTiming {
  GemmEngine engine;
  double tflops;
};

// Engines whose speed is within this fraction of the fastest one's count as equally fast.
// 10 %: on AMD EPYC Zen 4, where avx512bf16 and onednn are one speed on the rounded
// product, their measured ratio ranged 0.91-1.01 between starts (a third of them beside
// four busy processes, 2026-12-05); a 5 % band let that noise pick the engine in about one
// loaded start in five (docs/cpu_kernels.md).
constexpr double kEngineTieBand = 0.10;

// The choice itself, given what the environment forces, the engines available and the
// timings (asked for only when nothing is forced): the forced engine (ValueError naming
// the variable when it is not available), else the fastest timed engine among those
// available, where engines within kEngineTieBand of the fastest are ranked by a fixed
// preference (avx512bf16, avx2, onednn, amx, mkl, portable). Separate from the measurement so
// that a test can inject timings.
GemmEngine choose_gemm_engine(GemmKind kind, const std::optional<ForcedEngine>& forced,
                              const std::vector<GemmEngine>& available,
                              const std::function<std::vector<EngineTiming>()>& timings);

// The engine for `kind`'s GEMMs of `dtype`: float16 always runs on portable; for bfloat16
// the one the environment forces for the kind (ValueError if this CPU lacks it), else the
// one decided once per process: read from the engine cache file (engine_cache.h) where it
// holds this CPU's choice, else chosen on the engines measured now and written there.
GemmEngine gemm_engine(at::ScalarType dtype, GemmKind kind);

// The timings behind the unforced decision (measured now, or read from the cache file),
// and whether they came from the file.
//   fp32-out: x @ W.T, 512 x 2048 x 1024 (2.1 GFLOP), A kept widened, B fresh per run.
//   rounded:  G @ W with K complete, 512 x 1024 x 4096 (4.3 GFLOP), fresh operands per run:
//             as the gradient products, a deep K (the vocabulary or the rows) into a
//             block of the [BT, H] or [V, H] output.
// Each engine runs on one thread, its median over 9 rounds that alternate the engines, in
// TFLOP/s of that thread's CPU time times the thread count (a busy machine ranks the
// engines as a quiet one does).
const std::vector<EngineTiming>& gemm_engine_timings(GemmKind kind);
bool gemm_engine_from_cache(GemmKind kind);

// A fresh measurement of every engine on the kind's product (as above), for the benchmark
// that shows the choice from a quiet and from a loaded start.
std::vector<EngineTiming> measure_gemm_engines(GemmKind kind);

}  // namespace cpu
}  // namespace ascend_ops
