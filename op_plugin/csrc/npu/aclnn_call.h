// The aclnn two-phase call (aclnnXGetWorkspaceSize, then aclnnX on the current NPU
// stream), in torch_npu's execution context and type-checked against CANN's prototypes.
//
// Each call does what torch_npu's EXEC_NPU_CMD_EXT (op_api_common_base.h, every symbol
// exported by libtorch_npu.so) does around an aclnn op: the aclnn memory-pool context
// (InitExecCommonCtx / ReleaseExecCommonCtx / UnInitExecCommonCtx), the deterministic
// level (GetDeterministicLevel + ApplyDeterministicLevel), the workspace from that pool
// (GetWorkSpaceAddr), and phase 2 queued by RunAclCall with the stream's core binding
// (InitExecSubTheadCtx) and ExecuteApiFunc. Unlike the macro it checks phase 1's status
// on the calling thread (so a refusal is a Python error naming the op, with CANN's own
// message), calls phase 1 through the declared prototype (aclnn_prototypes.h), resolves
// the entry points once per op, and releases everything when either phase throws. The
// macro itself is not used: its hash-cache path needs symbols libtorch_npu.so does not
// export (tests/npu_link proves what the adapter binds).
#pragma once

#include "aclnn_prototypes.h"
#include "npu_ops.h"  // generated: AclnnOp constants and the kernel declarations

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "op_plugin/utils/op_api_common_base.h"
#include "torch_npu/csrc/core/npu/NPUException.h"
#include "torch_npu/csrc/core/npu/NPUFunctions.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/framework/OpParamMaker.h"

#include <memory>
#include <string>
#include <tuple>
#include <utility>

namespace ascend_ops::npu {

// The two entry points of an aclnn operator.
struct AclnnEntryPoints {
  void* get_workspace_size;
  void* execute;
};

// The entry points of `op`, looked up once per process and cached (torch_npu's
// GetOpApiFuncAddr searches the custom op packages on ASCEND_CUSTOM_OPP_PATH, then CANN's
// libopapi.so). Throws NotImplementedError naming the function and what to install when
// either is missing; a failed lookup is retried on the next call.
const AclnnEntryPoints& resolve_aclnn(const AclnnOp& op);

// True when both entry points of `name` resolve (for ascend_ops._npu.aclnn_available).
bool aclnn_available(const std::string& name);

// "161002 (ACLNN_ERR_PARAM_INVALID: ...)": an aclnn status with its meaning (SPEC §5).
std::string describe_status(int status);

// CANN's most recent error message for this thread (c10_npu_get_error_message), or "".
std::string cann_error_message();

namespace detail {

// Owns the aclTensor views made by ConvertTypes until the last holder lets go: the
// calling thread on an error, else the queued launch after it has run.
template <typename Tuple>
struct ConvertedArgs {
  Tuple values;
  explicit ConvertedArgs(Tuple t) : values(std::move(t)) {}
  ConvertedArgs(const ConvertedArgs&) = delete;
  ConvertedArgs& operator=(const ConvertedArgs&) = delete;
  ~ConvertedArgs() { ReleaseConvertTypes(values); }
};

// InitExecCommonCtx on entry, UnInitExecCommonCtx on every exit of the calling thread.
struct ExecContextScope {
  ExecContextScope() { InitExecCommonCtx(); }
  ~ExecContextScope() { UnInitExecCommonCtx(); }
  ExecContextScope(const ExecContextScope&) = delete;
  ExecContextScope& operator=(const ExecContextScope&) = delete;
};

[[noreturn]] void throw_phase1_error(const AclnnOp& op, int status, const char* invalid_hint);

}  // namespace detail

// Runs `op` on the current stream of the current device (the caller holds an NPUGuard)
// with `args` in the aclnn argument order (inputs, attributes, outputs; std::nullopt
// for an absent optional tensor). `Phase1` is the op's declared GetWorkspaceSize type
// (aclnn_prototypes.h): the converted arguments must match it exactly or this does not
// compile. The outputs are allocated by the caller. `invalid_hint` is appended when
// phase 1 answers ACLNN_ERR_PARAM_INVALID or an internal error.
template <typename Phase1, typename... Args>
void run_aclnn(const AclnnOp& op, const char* invalid_hint, Args&... args) {
  const AclnnEntryPoints& entry = resolve_aclnn(op);
  const detail::ExecContextScope context;
  const aclrtStream stream = GetAclStream();
  const uint32_t level = c10_npu::GetDeterministicLevel();
  at_npu::native::ApplyDeterministicLevel(static_cast<int64_t>(level),
                                          at::globalContext().deterministicAlgorithms(),
                                          /*isOpapi=*/true);

  // Phase 1 on this thread: wrap the tensors as aclTensor views, let the op check them
  // and size its workspace.
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  uint64_t* workspace_size_addr = &workspace_size;
  aclOpExecutor** executor_addr = &executor;
  using Tuple = decltype(ConvertTypes(args..., workspace_size_addr, executor_addr));
  auto converted = std::make_shared<detail::ConvertedArgs<Tuple>>(
      ConvertTypes(args..., workspace_size_addr, executor_addr));
  const int status = std::apply(
      [&](auto&... a) { return typed_call<Phase1>(entry.get_workspace_size, a...); },
      converted->values);
  if (status != 0) {
    ReleaseExecCommonCtx();
    detail::throw_phase1_error(op, status, invalid_hint);  // `converted` releases
  }
  void* workspace_addr = nullptr;
  if (workspace_size != 0) {
    try {
      workspace_addr = GetWorkSpaceAddr(workspace_size);
    } catch (...) {  // out of device memory: undo the pool context; `converted` releases
      ReleaseExecCommonCtx();
      throw;
    }
  }

  // Phase 2, queued on the stream's task queue (or run now when the queue is off). The
  // lambda shares ownership of the converted arguments, so they are released after the
  // launch has read them, or when the queue drops the lambda unrun.
  const void* execute = entry.execute;
  const char* name = op.name;
  auto launch = [converted, workspace_addr, workspace_size, stream, executor, execute,
                 name]() -> int {
    InitExecSubTheadCtx(stream);
    int ret = 0;
    try {
      ret = ExecuteApiFunc(execute, stream, workspace_addr, workspace_size, executor);
    } catch (...) {
      ReleaseExecCommonCtx();
      throw;
    }
    ReleaseExecCommonCtx();
    TORCH_CHECK(ret == 0, name, " failed: ", describe_status(ret), cann_error_message());
    return ret;
  };
  RunAclCall(name, launch);
}

}  // namespace ascend_ops::npu
