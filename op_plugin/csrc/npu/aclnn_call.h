// The aclnn two-phase call (aclnnXGetWorkspaceSize, then aclnnX on the current NPU
// stream), written against the API libtorch_npu.so exports.
//
// torch_npu's own EXEC_NPU_CMD (op_plugin/utils/op_api_common.h) references symbols that
// libtorch_npu.so does not export (e.g. OpPreparation::unsafe_empty_workspace, the hash
// cache globals): an extension built on it compiles but cannot load. Everything used
// here is either a template/inline in op_api_common_base.h (ConvertTypes,
// ReleaseConvertTypes, ConvertToOpApiFunc, call) or an exported function
// (GetOpApiFuncAddr, OpCommand::RunOpApiV2, c10_npu::getCurrentNPUStream); the CI
// link check (tests/npu_link) proves the built library resolves every symbol it needs.
#pragma once

#include "npu_ops.h"  // generated: AclnnOp constants and the kernel declarations

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "op_plugin/utils/op_api_common_base.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/framework/OpCommand.h"

#include <string>

namespace ascend_ops::npu {

// The two entry points of an aclnn operator.
struct AclnnEntryPoints {
  void* get_workspace_size;
  void* execute;
};

// Looks both entry points up at run time: torch_npu's GetOpApiFuncAddr searches the custom
// op packages on ASCEND_CUSTOM_OPP_PATH (libcust_opapi.so) first, then CANN's libopapi.so.
// Throws NotImplementedError naming the function and what to install when either is
// missing, so an old CANN gives a Python error instead of a call through a null pointer.
AclnnEntryPoints resolve_aclnn(const AclnnOp& op);

// True when both entry points of `name` resolve (for ascend_ops._npu.aclnn_available).
bool aclnn_available(const std::string& name);

// "161002 (ACLNN_ERR_PARAM_INVALID: ...)": an aclnn status with its meaning (SPEC §5).
std::string describe_status(int status);

// Runs `op` on `device`'s current stream with `args` in the aclnn argument order (inputs,
// attributes, outputs; std::nullopt for an absent optional tensor). The outputs must be
// allocated by the caller. `invalid_hint` is appended to the error when phase 1 rejects
// the arguments (ACLNN_ERR_PARAM_INVALID): what the built-in is known to refuse.
template <typename... Args>
void run_aclnn(const AclnnOp& op, const char* invalid_hint, const at::Device& device,
               Args&... args) {
  const AclnnEntryPoints entry = resolve_aclnn(op);
  const aclrtStream stream = c10_npu::getCurrentNPUStream(device.index()).stream(false);

  // Phase 1, on this thread: wrap the tensors as aclTensor views (ours until released),
  // let the op check them and size its workspace.
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  uint64_t* workspace_size_addr = &workspace_size;
  aclOpExecutor** executor_addr = &executor;
  auto converted = ConvertTypes(args..., workspace_size_addr, executor_addr);
  const auto get_workspace_size = ConvertToOpApiFunc(converted, entry.get_workspace_size);
  const int status = call(get_workspace_size, converted);
  if (status != 0) {
    ReleaseConvertTypes(converted);
    TORCH_CHECK(false, op.name, "GetWorkspaceSize rejected its arguments: ",
                describe_status(status),
                status == 161002 && invalid_hint != nullptr ? std::string(". ") + invalid_hint
                                                           : std::string());
  }

  // The workspace comes from torch_npu's caching allocator (at::empty on the device).
  // The lambda holds the tensor, so the block stays allocated until the launch has been
  // issued even when torch_npu's task queue runs the lambda later on another thread.
  at::Tensor workspace;
  void* workspace_addr = nullptr;
  if (workspace_size != 0) {
    try {
      workspace = at::empty({static_cast<int64_t>(workspace_size)},
                            at::TensorOptions().dtype(at::kByte).device(device));
    } catch (...) {  // out of device memory: do not leak the converted arguments
      ReleaseConvertTypes(converted);
      throw;
    }
    workspace_addr = workspace.data_ptr();
  }
  const auto execute = reinterpret_cast<OpApiFunc>(entry.execute);
  const char* name = op.name;

  // Phase 2, queued by torch_npu on the stream's task queue; the converted types are
  // released there, after the launch that reads them. A failed launch throws from the
  // lambda, as torch_npu's own EXEC_NPU_CMD does (its queue reports it to the caller).
  auto launch = [converted, workspace, workspace_addr, workspace_size, executor, stream,
                 execute, name]() -> int {
    const int ret = execute(workspace_addr, workspace_size, executor, stream);
    auto owned = converted;
    ReleaseConvertTypes(owned);
    TORCH_CHECK(ret == 0, name, " failed: ", describe_status(ret));
    return ret;
  };
  at_npu::native::OpCommand::RunOpApiV2(name, launch);
}

}  // namespace ascend_ops::npu
