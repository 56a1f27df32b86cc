#include "cpu_caches.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace ascend_ops {
namespace cpu {
namespace {

std::string read_line(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

// "32K", "1024K", "32M" or a plain byte count, as sysfs writes a cache's size; 0 if unreadable.
int64_t parse_size(const std::string& text) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (...) {
    return 0;
  }
  const char unit = used < text.size() ? text[used] : ' ';
  return unit == 'K' ? value << 10 : unit == 'M' ? value << 20 : unit == 'G' ? value << 30 : value;
}

CpuCaches from_sysfs() {
  CpuCaches caches{0, 0, 0, "sysfs"};
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = read_line(dir + "level");
    if (level.empty()) {
      break;
    }
    const std::string type = read_line(dir + "type");
    const int64_t size = parse_size(read_line(dir + "size"));
    if (level == "1" && type == "Data") {
      caches.l1d = size;
    } else if (level == "2" && type != "Instruction") {
      caches.l2 = size;
    } else if (level == "3" && type != "Instruction") {
      caches.l3 = size;
    }
  }
  return caches;
}

CpuCaches read_caches() {
  CpuCaches caches = from_sysfs();
  if (caches.l1d > 0 && caches.l2 > 0) {
    return caches;
  }
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  caches = CpuCaches{sysconf(_SC_LEVEL1_DCACHE_SIZE), sysconf(_SC_LEVEL2_CACHE_SIZE),
                     sysconf(_SC_LEVEL3_CACHE_SIZE), "sysconf"};
  if (caches.l1d > 0 && caches.l2 > 0) {
    caches.l3 = caches.l3 > 0 ? caches.l3 : 0;
    return caches;
  }
#endif
  return CpuCaches{32 << 10, 512 << 10, 8 << 20, "default"};
}

}  // namespace

const CpuCaches& cpu_caches() {
  static const CpuCaches caches = read_caches();
  return caches;
}

}  // namespace cpu
}  // namespace ascend_ops
