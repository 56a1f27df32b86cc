// bn_loops(): which build of the batch-norm loops runs (batch_norm_loops.h). The AVX512 and
// AVX2 builds exist only in a build with the x86 kernels (../isa_builds.h); elsewhere
// (aarch64) the portable build is the only one, and forcing another is a ValueError.
#include "../isa_builds.h"
#include "../gemm/engines/avx2/avx2_kernels.h"
#include "../gemm/engines/avx512bf16/avx512_kernels.h"
#include "../gemm/choice/engine_switch.h"
#include "batch_norm_loops.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace ascend_ops {
namespace cpu {
namespace {

#if ASCEND_OPS_X86_KERNELS
bool avx2_loops_supported() {
  static const bool supported = avx2_kernels_supported() && f16c_supported();
  return supported;
}
#endif

// The builds this library holds, widest first (the first one this CPU runs is the default).
struct Build {
  const char* name;
  const BnLoops* loops;
  bool supported;
  const char* needs;
};

const std::vector<Build>& builds() {
  static const std::vector<Build> all = {
#if ASCEND_OPS_X86_KERNELS
      {"avx512", &bn_avx512::kLoops, avx512_core_supported(), "AVX512-F/BW/VL/DQ"},
      {"avx2", &bn_avx2::kLoops, avx2_loops_supported(), "AVX2, FMA and F16C"},
#else
      // Named so that forcing them says why, not "unknown".
      {"avx512", nullptr, false, "AVX512-F/BW/VL/DQ on x86-64 (this build holds the portable loops only)"},
      {"avx2", nullptr, false, "AVX2, FMA and F16C on x86-64 (this build holds the portable loops only)"},
#endif
      {"portable", &bn_portable::kLoops, true, ""}};
  return all;
}

// The build ASCEND_OPS_CPU_BN_LOOPS names, nullptr for auto (unset or empty).
const BnLoops* forced_build() {
  const char* value = std::getenv("ASCEND_OPS_CPU_BN_LOOPS");
  if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) {
    return nullptr;
  }
  for (const Build& build : builds()) {
    if (std::strcmp(value, build.name) == 0) {
      TORCH_CHECK_VALUE(build.supported, "ASCEND_OPS_CPU_BN_LOOPS=", value,
                        " asks for a build this CPU cannot run: it needs ", build.needs);
      return build.loops;
    }
  }
  TORCH_CHECK_VALUE(false, "ASCEND_OPS_CPU_BN_LOOPS must be one of auto, avx512, avx2, "
                    "portable; got '", value, "'");
  return nullptr;
}

}  // namespace

const BnLoops& bn_loops() {
  // The switches are read per call (a getenv per kernel call is noise) so tests can switch
  // builds, and parsed on every CPU, so a bad value is an error on every CPU.
  const BnLoops* forced = forced_build();
  if (portable_forced()) {  // ASCEND_OPS_CPU_GEMM=portable sends these loops there too
    TORCH_CHECK_VALUE(forced == nullptr || forced == &bn_portable::kLoops,
                      "ASCEND_OPS_CPU_GEMM=portable asks for the portable loops but "
                      "ASCEND_OPS_CPU_BN_LOOPS='", forced->engine, "'");
    return bn_portable::kLoops;
  }
  if (forced != nullptr) {
    return *forced;
  }
  for (const Build& build : builds()) {
    if (build.supported) {
      return *build.loops;
    }
  }
  return bn_portable::kLoops;  // never reached: the portable build is always supported
}

}  // namespace cpu
}  // namespace ascend_ops
