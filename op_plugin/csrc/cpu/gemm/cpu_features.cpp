#include "avx2_kernels.h"
#include "avx512_kernels.h"

namespace ascend_ops {
namespace cpu {

bool avx512_core_supported() {
  static const bool supported =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return supported;
}

bool avx512_kernels_supported() {
  static const bool supported = avx512_core_supported() && __builtin_cpu_supports("avx512bf16");
  return supported;
}

bool avx2_kernels_supported() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
}

}  // namespace cpu
}  // namespace ascend_ops
