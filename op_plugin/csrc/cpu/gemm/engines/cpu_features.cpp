// Which x86 kernels this CPU runs. The questions are asked on every build; a build without
// the x86 kernels (cpu/isa_builds.h) answers no, and names no x86 builtin
// (__builtin_cpu_supports is x86-only in GCC before 14).
#include "../../isa_builds.h"
#include "amx/amx_kernels.h"
#include "avx2/avx2_kernels.h"
#include "avx512bf16/avx512_kernels.h"

#if ASCEND_OPS_X86_KERNELS
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ascend_ops {
namespace cpu {
#if ASCEND_OPS_X86_KERNELS
namespace {

// Linux's arch_prctl request for a dynamically enabled state component, and AMX's tile data
// component (arch/x86/include/uapi/asm/prctl.h; XFEATURE_XTILEDATA = 18).
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

}  // namespace
#endif

bool avx512_core_supported() {
#if ASCEND_OPS_X86_KERNELS
  static const bool supported =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return supported;
#else
  return false;
#endif
}

bool avx512_kernels_supported() {
#if ASCEND_OPS_X86_KERNELS
  static const bool supported = avx512_core_supported() && __builtin_cpu_supports("avx512bf16");
  return supported;
#else
  return false;
#endif
}

bool amx_bf16_supported() {
#if ASCEND_OPS_X86_KERNELS
  // CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE (Intel SDM).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx >> 22 & 1) && (edx >> 24 & 1);
#else
  return false;
#endif
}

bool amx_tiles_granted() {
#if ASCEND_OPS_X86_KERNELS
  static const bool granted = amx_bf16_supported() &&
                              syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return granted;
#else
  return false;
#endif
}

bool amx_kernels_supported() {
#if ASCEND_OPS_X86_KERNELS
  static const bool supported = avx512_kernels_supported() && amx_tiles_granted();
  return supported;
#else
  return false;
#endif
}

bool avx2_kernels_supported() {
#if ASCEND_OPS_X86_KERNELS
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
#else
  return false;
#endif
}

bool f16c_supported() {
#if ASCEND_OPS_X86_KERNELS
  static const bool supported = __builtin_cpu_supports("f16c");
  return supported;
#else
  return false;
#endif
}

}  // namespace cpu
}  // namespace ascend_ops
