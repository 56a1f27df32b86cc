#include "aclnn_call.h"

#include <mutex>
#include <unordered_map>

namespace ascend_ops::npu {

const AclnnEntryPoints& resolve_aclnn(const AclnnOp& op) {
  // Found entry points never change for the life of the process (the libraries stay
  // loaded), so each op pays GetOpApiFuncAddr's search (realpath, dlopen, stat) once.
  static std::mutex mutex;
  static std::unordered_map<std::string, AclnnEntryPoints> found;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto hit = found.find(op.name); hit != found.end()) {
    return hit->second;
  }
  const std::string phase1 = std::string(op.name) + "GetWorkspaceSize";
  const AclnnEntryPoints entry{GetOpApiFuncAddr(phase1.c_str()), GetOpApiFuncAddr(op.name)};
  TORCH_CHECK_NOT_IMPLEMENTED(
      entry.get_workspace_size != nullptr && entry.execute != nullptr, op.name,
      " not found: ",
      op.custom ? std::string("install the ascend_ops custom op package (ascendc_kernels/build.sh, "
                              "then source <install-path>/vendors/ascend_ops/bin/set_env.bash so "
                              "ASCEND_CUSTOM_OPP_PATH names it; see docs/npu.md)")
                : std::string("install CANN >= ") + op.cann +
                      " (its libopapi.so ships it) or use impl='npu_custom' with the ascend_ops "
                      "custom op package (ascendc_kernels/build.sh, then source the installed "
                      "package's set_env.bash so ASCEND_CUSTOM_OPP_PATH names it)",
      "; looked for ", entry.get_workspace_size == nullptr ? phase1 : std::string(op.name),
      " in the custom op packages on ASCEND_CUSTOM_OPP_PATH and in CANN's libopapi.so");
  return found.emplace(op.name, entry).first->second;
}

bool aclnn_available(const std::string& name) {
  const std::string phase1 = name + "GetWorkspaceSize";
  return GetOpApiFuncAddr(phase1.c_str()) != nullptr && GetOpApiFuncAddr(name.c_str()) != nullptr;
}

std::string describe_status(int status) {
  const std::string code = std::to_string(status);
  if (status == 161001) {
    return code + " (ACLNN_ERR_PARAM_NULLPTR: a required argument was null)";
  }
  if (status == 161002) {
    return code + " (ACLNN_ERR_PARAM_INVALID: a dtype, shape or value outside what the "
                  "op supports)";
  }
  if (status == 361001) {
    return code + " (ACLNN_ERR_RUNTIME_ERROR: the op does not run on this NPU; see "
                  "docs/npu.md for the platforms of each op)";
  }
  if (status >= 561000) {
    return code + " (ACLNN_ERR_INNER: an internal error of the op, often a limit of its "
                  "tiling; see the CANN log)";
  }
  return code;
}

std::string cann_error_message() {
  const char* message = c10_npu::c10_npu_get_error_message();
  if (message == nullptr || *message == '\0') {
    return {};
  }
  return std::string("\nCANN: ") + message;
}

namespace detail {
namespace {

// CANN's PTA executor-cache hooks (libopapi.so), each null when the CANN in use lacks it.
struct PtaCacheHooks {
  void (*init)() = nullptr;                          // InitPTACacheThreadLocal
  void (*set_hash_key)(uint64_t) = nullptr;          // SetPTAHashKey
  void (*set_cache_hash_key)(uint8_t*, size_t) = nullptr;  // SetPTACacheHashKey
  void (*uninit)() = nullptr;                        // UnInitPTACacheThreadLocal
};

const PtaCacheHooks& pta_cache_hooks() {
  static const PtaCacheHooks hooks = [] {
    PtaCacheHooks h;
    h.init = reinterpret_cast<void (*)()>(GetOpApiFuncAddr("InitPTACacheThreadLocal"));
    h.set_hash_key = reinterpret_cast<void (*)(uint64_t)>(GetOpApiFuncAddr("SetPTAHashKey"));
    h.set_cache_hash_key =
        reinterpret_cast<void (*)(uint8_t*, size_t)>(GetOpApiFuncAddr("SetPTACacheHashKey"));
    h.uninit = reinterpret_cast<void (*)()>(GetOpApiFuncAddr("UnInitPTACacheThreadLocal"));
    return h;
  }();
  return hooks;
}

}  // namespace

PtaCacheResetScope::PtaCacheResetScope() {
  const PtaCacheHooks& hooks = pta_cache_hooks();
  if (hooks.init != nullptr && hooks.set_hash_key != nullptr) {  // as EXEC_NPU_CMD_SYNC
    hooks.init();
    hooks.set_hash_key(0);
    if (hooks.set_cache_hash_key != nullptr) {
      hooks.set_cache_hash_key(nullptr, 0);
    }
  }
}

PtaCacheResetScope::~PtaCacheResetScope() {
  const PtaCacheHooks& hooks = pta_cache_hooks();
  if (hooks.uninit != nullptr) {
    hooks.uninit();
  }
}

void throw_phase1_error(const AclnnOp& op, int status, const char* invalid_hint) {
  const bool refused = status == 161002 || status >= 561000;
  TORCH_CHECK(false, op.name, "GetWorkspaceSize rejected its arguments: ",
              describe_status(status),
              refused && invalid_hint != nullptr ? std::string(". ") + invalid_hint
                                                 : std::string(),
              cann_error_message());
}

}  // namespace detail
}  // namespace ascend_ops::npu
