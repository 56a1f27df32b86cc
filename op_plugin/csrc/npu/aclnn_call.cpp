#include "aclnn_call.h"

namespace ascend_ops::npu {

AclnnEntryPoints resolve_aclnn(const AclnnOp& op) {
  const std::string phase1 = std::string(op.name) + "GetWorkspaceSize";
  AclnnEntryPoints entry{GetOpApiFuncAddr(phase1.c_str()), GetOpApiFuncAddr(op.name)};
  TORCH_CHECK_NOT_IMPLEMENTED(
      entry.get_workspace_size != nullptr && entry.execute != nullptr, op.name,
      " not found: install CANN >= ", op.cann,
      " (its libopapi.so ships it) or the ascend_ops custom op package "
      "(ascendc_kernels/build.sh, then source the installed package's set_env.bash so "
      "ASCEND_CUSTOM_OPP_PATH names it); looked for ",
      entry.get_workspace_size == nullptr ? phase1 : std::string(op.name),
      " in the custom op packages on ASCEND_CUSTOM_OPP_PATH and in CANN's libopapi.so");
  return entry;
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
    return code + " (ACLNN_ERR_RUNTIME_ERROR: this platform is not supported; the op "
                  "runs on Atlas A2/A3 only)";
  }
  if (status >= 561000) {
    return code + " (ACLNN_ERR_INNER: an internal error of the op; see the CANN log)";
  }
  return code;
}

}  // namespace ascend_ops::npu
