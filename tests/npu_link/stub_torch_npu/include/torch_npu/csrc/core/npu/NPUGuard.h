// TEST DOUBLE (see op_plugin/utils/op_api_common_base.h here): the kernels run on CPU.
#pragma once
#include <c10/core/Device.h>
namespace c10_npu {
struct NPUGuard {
  explicit NPUGuard(c10::Device) {}
};
}  // namespace c10_npu
