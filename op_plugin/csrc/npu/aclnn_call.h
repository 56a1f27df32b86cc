// The aclnn two-phase call (aclnnXGetWorkspaceSize, then aclnnX on the current NPU
// stream), in torch_npu's execution context and type-checked against CANN's prototypes.
//
// Each call does what torch_npu 2.13.0's EXEC_NPU_CMD_V1_EXT (op_api_common_base.h, every
// symbol exported by libtorch_npu.so) does around an aclnn op, in its order:
//   InitExecCommonCtx (the aclnn memory-pool context), GetAclStream, the deterministic
//   level (GetDeterministicLevel + ApplyDeterministicLevel), ConvertTypes, phase 1,
//   GetWorkSpaceAddr, then on the task queue (RunAclCall): InitExecSubTheadCtx,
//   ExecuteApiFunc, ReleaseConvertTypes (the aclTensors, created inside the pool
//   context, are destroyed first) and ReleaseExecCommonCtx; UnInitExecCommonCtx last.
// The macro's executor cache is not used (it needs symbols libtorch_npu.so does not
// export; tests/npu_link proves what the adapter binds), so, as EXEC_NPU_CMD_SYNC does
// for its uncached call, the thread's PTA cache state is reset before phase 1
// (InitPTACacheThreadLocal, SetPTAHashKey(0), SetPTACacheHashKey(nullptr, 0), looked up
// in CANN's libopapi.so like every aclnn function) and undone after the launch
// (UnInitPTACacheThreadLocal): a hash key left by an earlier cached torch_npu call on this
// thread must not file our executor under it.
// Unlike the macro this checks phase 1's status on the calling thread (so a refusal is a
// Python error naming the op, with CANN's own message), calls phase 1 through the
// declared prototype (aclnn_prototypes.h), resolves the entry points once per op, and
// keeps the same release order when phase 1 or the workspace fails.
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
// GetOpApiFuncAddr searches the custom op packages on ASCEND_CUSTOM_OPP_PATH and in
// $ASCEND_OPP_PATH/vendors/config.ini's load_priority, then CANN's libopapi.so). Throws NotImplementedError naming the function and what to install when
// either is missing; a failed lookup is retried on the next call.
const AclnnEntryPoints& resolve_aclnn(const AclnnOp& op);

// True when both entry points of `name` resolve (for ascend_ops._npu.aclnn_available).
bool aclnn_available(const std::string& name);

// "161002 (ACLNN_ERR_PARAM_INVALID: ...)": an aclnn status with its meaning (SPEC §5).
std::string describe_status(int status);

// CANN's most recent error message for this thread (c10_npu_get_error_message), or "".
std::string cann_error_message();

namespace detail {

// Owns the aclTensor views made by ConvertTypes. release() destroys them (once): the
// launch calls it after phase 2, the calling thread when phase 1 or the workspace fails,
// each before ReleaseExecCommonCtx. The destructor is the backstop for a launch the task
// queue drops unrun.
template <typename Tuple>
struct ConvertedArgs {
  Tuple values;
  bool released = false;
  explicit ConvertedArgs(Tuple t) : values(std::move(t)) {}
  ConvertedArgs(const ConvertedArgs&) = delete;
  ConvertedArgs& operator=(const ConvertedArgs&) = delete;
  void release() {
    if (!released) {
      released = true;
      ReleaseConvertTypes(values);
    }
  }
  ~ConvertedArgs() { release(); }
};

// InitExecCommonCtx on entry, UnInitExecCommonCtx on every exit of the calling thread.
struct ExecContextScope {
  ExecContextScope() { InitExecCommonCtx(); }
  ~ExecContextScope() { UnInitExecCommonCtx(); }
  ExecContextScope(const ExecContextScope&) = delete;
  ExecContextScope& operator=(const ExecContextScope&) = delete;
};

// The thread's PTA executor-cache state reset for an uncached call, as EXEC_NPU_CMD_SYNC
// does: InitPTACacheThreadLocal + SetPTAHashKey(0) + SetPTACacheHashKey(nullptr, 0) on
// entry (when the CANN in use has them), UnInitPTACacheThreadLocal on exit.
struct PtaCacheResetScope {
  PtaCacheResetScope();
  ~PtaCacheResetScope();
  PtaCacheResetScope(const PtaCacheResetScope&) = delete;
  PtaCacheResetScope& operator=(const PtaCacheResetScope&) = delete;
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
  const detail::PtaCacheResetScope no_cache;  // where the macro would consult its cache

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
    converted->release();
    ReleaseExecCommonCtx();
    detail::throw_phase1_error(op, status, invalid_hint);
  }
  void* workspace_addr = nullptr;
  if (workspace_size != 0) {
    try {
      workspace_addr = GetWorkSpaceAddr(workspace_size);
    } catch (...) {  // out of device memory: the tensors, then the pool context
      converted->release();
      ReleaseExecCommonCtx();
      throw;
    }
  }

  // Phase 2, queued on the stream's task queue (or run now when the queue is off). The
  // lambda shares ownership of the converted arguments: it destroys them once the launch
  // has read them, before releasing the pool context they were made in; should the queue
  // drop the lambda unrun, the last holder destroys them.
  const void* execute = entry.execute;
  const char* name = op.name;
  auto launch = [converted, workspace_addr, workspace_size, stream, executor, execute,
                 name]() -> int {
    InitExecSubTheadCtx(stream);
    int ret = 0;
    try {
      ret = ExecuteApiFunc(execute, stream, workspace_addr, workspace_size, executor);
    } catch (...) {
      converted->release();
      ReleaseExecCommonCtx();
      throw;
    }
    converted->release();
    ReleaseExecCommonCtx();
    TORCH_CHECK(ret == 0, name, " failed: ", describe_status(ret), cann_error_message());
    return ret;
  };
  RunAclCall(name, launch);
}

}  // namespace ascend_ops::npu
