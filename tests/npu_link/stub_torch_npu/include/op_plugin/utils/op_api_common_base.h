// TEST DOUBLE of torch_npu's op_plugin/utils/op_api_common_base.h: the declarations the
// NPU adapter uses, defined by tests/npu_link/stub_torch_npu/recorder.cpp, which records
// each call. With it the adapter's kernels run on CPU tensors and every step they take
// around an aclnn op, and every argument phase 1 receives, can be checked.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>

typedef struct aclTensor aclTensor;
typedef struct aclOpExecutor aclOpExecutor;
typedef void* aclrtStream;

void* GetOpApiFuncAddr(const char* name);
aclTensor* ConvertType(const at::Tensor& tensor);
aclTensor* ConvertType(const std::optional<at::Tensor>& tensor);
template <typename T>
T ConvertType(T value) {
  return value;
}
template <typename... Ts>
auto ConvertTypes(Ts&... args) {
  return std::make_tuple(ConvertType(args)...);
}
void Release(aclTensor* tensor);
template <typename T>
void Release(T) {}
template <typename Tuple>
void ReleaseConvertTypes(Tuple& t) {
  std::apply([](auto&... value) { (Release(value), ...); }, t);
}

void InitExecCommonCtx();
void UnInitExecCommonCtx();
void ReleaseExecCommonCtx();
aclrtStream GetAclStream();
void* GetWorkSpaceAddr(uint64_t workspace_size);
void InitExecSubTheadCtx(aclrtStream stream);
int ExecuteApiFunc(const void* func, aclrtStream stream, void* workspace, uint64_t size,
                   aclOpExecutor* executor);
void RunAclCall(const std::string& name, const std::function<int()>& func);
