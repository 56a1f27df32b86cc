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
    case GemmEngine::kMkl:
      return "mkl";
    case GemmEngine::kAmx:
      return "amx";
    case GemmEngine::kAvx512Bf16:
      return "avx512bf16";
    case GemmEngine::kAvx2:
      return "avx2";
    case GemmEngine::kPortable:
      return "portable";
  }
  return "unknown";
}

const char* kind_name(GemmKind kind) {
  return kind == GemmKind::kFp32Out ? "fp32_out" : "rounded";
}

std::optional<GemmEngine> engine_named(const std::string& name) {
  for (const GemmEngine e : {GemmEngine::kOneDnn, GemmEngine::kMkl, GemmEngine::kAmx,
                             GemmEngine::kAvx512Bf16, GemmEngine::kAvx2, GemmEngine::kPortable}) {
    if (name == engine_name(e)) {
      return e;
    }
  }
  return std::nullopt;
}

namespace {

// `variable`'s engine, nullopt when unset, empty or "auto"; ValueError naming it otherwise.
std::optional<GemmEngine> engine_variable(const char* variable) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) {
    return std::nullopt;
  }
  const std::optional<GemmEngine> engine = engine_named(value);
  TORCH_CHECK_VALUE(engine.has_value(), variable, " must be one of auto, onednn, mkl, amx, "
                    "avx512bf16, avx2, portable; got '", value, "'");
  return engine;
}

// ASCEND_OPS_CPU_GEMM and its alias ASCEND_OPS_CPU_PORTABLE, as one forced engine.
std::optional<ForcedEngine> general_forced_engine() {
  std::optional<ForcedEngine> forced;
  if (const std::optional<GemmEngine> e = engine_variable("ASCEND_OPS_CPU_GEMM")) {
    forced = ForcedEngine{*e, "ASCEND_OPS_CPU_GEMM"};
  }
  if (const char* alias = std::getenv("ASCEND_OPS_CPU_PORTABLE"); alias != nullptr && *alias != '\0') {
    TORCH_CHECK_VALUE(std::strcmp(alias, "1") == 0 || std::strcmp(alias, "0") == 0,
                      "ASCEND_OPS_CPU_PORTABLE must be 1 or 0 (alias of "
                      "ASCEND_OPS_CPU_GEMM=portable); got '", alias, "'");
    if (std::strcmp(alias, "1") == 0) {
      TORCH_CHECK_VALUE(!forced.has_value() || forced->engine == GemmEngine::kPortable,
                        "ASCEND_OPS_CPU_PORTABLE=1 asks for the portable path but "
                        "ASCEND_OPS_CPU_GEMM='", engine_name(forced->engine), "'");
      forced = ForcedEngine{GemmEngine::kPortable, "ASCEND_OPS_CPU_PORTABLE"};
    }
  }
  return forced;
}

}  // namespace

std::optional<ForcedEngine> forced_gemm_engine(GemmKind kind) {
  // Both the general and the per-kind variables are parsed, so a bad value in any of them
  // is an error whichever kind asks.
  const std::optional<ForcedEngine> general = general_forced_engine();
  const std::optional<GemmEngine> fp32_out = engine_variable("ASCEND_OPS_CPU_GEMM_FP32_OUT");
  const std::optional<GemmEngine> rounded = engine_variable("ASCEND_OPS_CPU_GEMM_ROUNDED");
  const char* variable =
      kind == GemmKind::kFp32Out ? "ASCEND_OPS_CPU_GEMM_FP32_OUT" : "ASCEND_OPS_CPU_GEMM_ROUNDED";
  const char* value = std::getenv(variable);
  if (value != nullptr && *value != '\0') {  // set: it decides, "auto" included
    const std::optional<GemmEngine>& own = kind == GemmKind::kFp32Out ? fp32_out : rounded;
    return own.has_value() ? std::optional<ForcedEngine>(ForcedEngine{*own, variable}) : std::nullopt;
  }
  return general;
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
  forced_gemm_engine(GemmKind::kFp32Out);  // every switch parsed: a bad one fails here too
  const std::optional<ForcedEngine> forced = general_forced_engine();
  return forced.has_value() && forced->engine == GemmEngine::kPortable;
}

}  // namespace cpu
}  // namespace ascend_ops
