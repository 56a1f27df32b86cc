// The data cache sizes of the CPU the process runs on, read once at run time, from which the
// own GEMMs derive their blocking (bf16_gemm.cpp, avx2_gemm.cpp) instead of constants tuned
// on one machine. Portable: Linux sysfs, else sysconf, else a stated default.
#pragma once

#include <cstdint>

namespace ascend_ops {
namespace cpu {

struct CpuCaches {
  int64_t l1d;         // bytes of level-1 data cache of one core
  int64_t l2;          // bytes of level-2 cache of one core
  int64_t l3;          // bytes of the last-level cache (0 where there is none)
  const char* source;  // "sysfs", "sysconf" or "default"
};

// The sizes of CPU 0's caches (/sys/devices/system/cpu/cpu0/cache, else sysconf's
// _SC_LEVEL*_CACHE_SIZE, else 32 KiB / 512 KiB / 8 MiB), read on the first call.
const CpuCaches& cpu_caches();

}  // namespace cpu
}  // namespace ascend_ops
