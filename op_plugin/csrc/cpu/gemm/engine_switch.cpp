#include "engine_switch.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>

namespace ascend_ops {
namespace cpu {

const char* engine_name(GemmEngine engine) {
  switch (engine) {
    case GemmEngine::kOneDnn:
      return "onednn";
    case GemmEngine::kAvx512Bf16:
      return "avx512bf16";
    case GemmEngine::kAvx2:
      return "avx2";
    case GemmEngine::kPortable:
      return "portable";
  }
  return "unknown";
}

std::optional<GemmEngine> forced_gemm_engine() {
  std::optional<GemmEngine> forced;
  if (const char* value = std::getenv("ASCEND_OPS_CPU_GEMM"); value != nullptr && *value != '\0') {
    if (std::strcmp(value, "auto") == 0) {
      forced = std::nullopt;
    } else if (std::strcmp(value, "onednn") == 0) {
      forced = GemmEngine::kOneDnn;
    } else if (std::strcmp(value, "avx512bf16") == 0) {
      forced = GemmEngine::kAvx512Bf16;
    } else if (std::strcmp(value, "avx2") == 0) {
      forced = GemmEngine::kAvx2;
    } else if (std::strcmp(value, "portable") == 0) {
      forced = GemmEngine::kPortable;
    } else {
      TORCH_CHECK_VALUE(false, "ASCEND_OPS_CPU_GEMM must be one of auto, onednn, avx512bf16, "
                        "avx2, portable; got '", value, "'");
    }
  }
  if (const char* alias = std::getenv("ASCEND_OPS_CPU_PORTABLE"); alias != nullptr && *alias != '\0') {
    TORCH_CHECK_VALUE(std::strcmp(alias, "1") == 0 || std::strcmp(alias, "0") == 0,
                      "ASCEND_OPS_CPU_PORTABLE must be 1 or 0 (alias of "
                      "ASCEND_OPS_CPU_GEMM=portable); got '", alias, "'");
    if (std::strcmp(alias, "1") == 0) {
      TORCH_CHECK_VALUE(!forced.has_value() || *forced == GemmEngine::kPortable,
                        "ASCEND_OPS_CPU_PORTABLE=1 asks for the portable path but "
                        "ASCEND_OPS_CPU_GEMM='", engine_name(*forced), "'");
      forced = GemmEngine::kPortable;
    }
  }
  return forced;
}

namespace {

bool debug_switch(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return false;
  }
  TORCH_CHECK_VALUE(std::strcmp(value, "1") == 0 || std::strcmp(value, "0") == 0, name,
                    " must be 1 or 0; got '", value, "'");
  return *value == '1';
}

}  // namespace

bool gemm_operand_check_enabled() { return debug_switch("ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS"); }

bool scratch_poison_enabled() { return debug_switch("ASCEND_OPS_CPU_POISON_SCRATCH"); }

bool portable_forced() {
  const std::optional<GemmEngine> forced = forced_gemm_engine();
  return forced.has_value() && *forced == GemmEngine::kPortable;
}

}  // namespace cpu
}  // namespace ascend_ops
