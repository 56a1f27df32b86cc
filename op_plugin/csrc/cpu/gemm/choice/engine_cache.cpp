#include "engine_cache.h"

#include "engine_choice.h"

#include <ATen/Parallel.h>
#include <torch/headeronly/version.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

namespace ascend_ops {
namespace cpu {
namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// The model name and the two flags that decide which engines are fast (cpu_info.py reads
// the same), from /proc/cpuinfo; elsewhere "unknown CPU".
std::string cpu_description() {
  std::ifstream file("/proc/cpuinfo");
  std::string line, model = "unknown CPU", flags;
  while (std::getline(file, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name") {
      model = value;
    } else if (key == "flags" || key == "Features") {
      flags = " " + value + " ";
      break;
    }
  }
  std::string isa;
  for (const char* flag : {"amx_bf16", "avx512_bf16", "avx2"}) {
    if (flags.find(std::string(" ") + flag + " ") != std::string::npos) {
      isa += (isa.empty() ? "" : ",") + std::string(flag);
    }
  }
  return model + "|" + (isa.empty() ? "-" : isa);
}

void make_parents(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return;
  }
}

std::vector<std::string> split(const std::string& line, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(line);
  std::string part;
  while (std::getline(stream, part, separator)) parts.push_back(part);
  return parts;
}

std::string format_timings(const std::vector<EngineTiming>& timings) {
  std::string text;
  char buffer[64];
  for (const EngineTiming& t : timings) {
    std::snprintf(buffer, sizeof(buffer), "%s=%.4f", engine_name(t.engine), t.tflops);
    text += (text.empty() ? "" : " ") + std::string(buffer);
  }
  return text;
}

std::vector<EngineTiming> parse_timings(const std::string& text) {
  std::vector<EngineTiming> timings;
  for (const std::string& item : split(text, ' ')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    const std::optional<GemmEngine> engine = engine_named(item.substr(0, eq));
    if (engine.has_value()) {
      timings.push_back({*engine, std::atof(item.c_str() + eq + 1)});
    }
  }
  return timings;
}

const char* const kHeader =
    "# ascend_ops: the bfloat16 GEMM engine its CPU kernels chose per kind of product, one line\n"
    "# per CPU, torch version, thread count and kind (key, kind, engine, TFLOP/s measured,\n"
    "# load average, when). Delete this file to measure again; ASCEND_OPS_CPU_GEMM_CACHE\n"
    "# moves it (a path) or turns it off (off).\n";

}  // namespace

std::string engine_cache_path() {
  const std::string set = environment("ASCEND_OPS_CPU_GEMM_CACHE");
  if (set == "off" || set == "0") {
    return "";
  }
  if (!set.empty()) {
    return set;
  }
  std::string base = environment("XDG_CACHE_HOME");
  if (base.empty() || base[0] != '/') {  // XDG: a relative path is invalid and ignored
    const std::string home = environment("HOME");
    if (home.empty()) return "";
    base = home + "/.cache";
  }
  return base + "/ascend_ops/cpu_gemm_engines.tsv";
}

std::string engine_cache_key() {
  return cpu_description() + "|torch " + TORCH_VERSION + "|" +
         std::to_string(at::get_num_threads()) + " threads";
}

std::optional<CachedChoice> read_cached_choice(GemmKind kind, const std::vector<GemmEngine>& available) {
  const std::string path = engine_cache_path();
  if (path.empty()) return std::nullopt;
  std::ifstream file(path);
  const std::string key = engine_cache_key();
  std::string line;
  std::optional<CachedChoice> found;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> fields = split(line, '\t');
    if (fields.size() < 3 || fields[0] != key || fields[1] != kind_name(kind)) continue;
    const std::optional<GemmEngine> engine = engine_named(fields[2]);
    if (!engine.has_value() ||
        std::find(available.begin(), available.end(), *engine) == available.end()) {
      continue;
    }
    const bool timed = fields.size() > 3;
    std::vector<EngineTiming> timings = timed ? parse_timings(fields[3]) : std::vector<EngineTiming>{};
    // A choice made before an engine existed (a newer build of the package offers amx, say)
    // did not weigh it: measured again. A line without the timings field is taken as it is.
    const bool weighed_all =
        !timed || std::all_of(available.begin(), available.end(), [&](GemmEngine e) {
          return std::any_of(timings.begin(), timings.end(),
                             [&](const EngineTiming& t) { return t.engine == e; });
        });
    if (!weighed_all) continue;
    found = CachedChoice{*engine, std::move(timings)};
  }
  return found;
}

void store_cached_choice(GemmKind kind, GemmEngine engine, const std::vector<EngineTiming>& timings) {
  const std::string path = engine_cache_path();
  if (path.empty()) return;
  const std::string key = engine_cache_key();
  std::vector<std::string> kept;
  {
    std::ifstream file(path);
    std::string line;
    while (std::getline(file, line)) {
      if (line.empty() || line[0] == '#') continue;
      const std::vector<std::string> fields = split(line, '\t');
      if (fields.size() >= 2 && fields[0] == key && fields[1] == kind_name(kind)) continue;
      kept.push_back(line);
    }
  }
  double load[1] = {0.0};
  getloadavg(load, 1);
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", std::localtime(&now));
  char load_text[32];
  std::snprintf(load_text, sizeof(load_text), "load %.2f", load[0]);
  kept.push_back(key + "\t" + kind_name(kind) + "\t" + engine_name(engine) + "\t" +
                 format_timings(timings) + "\t" + load_text + "\t" + when);
  make_parents(path);
  // Written whole to a temporary file and renamed: a process reading at the same moment
  // sees the old file or the new one, never half of one.
  const std::string temporary = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(temporary);
    if (!out) return;
    out << kHeader;
    for (const std::string& line : kept) out << line << "\n";
    if (!out) return;
  }
  std::rename(temporary.c_str(), path.c_str());
}

}  // namespace cpu
}  // namespace ascend_ops
