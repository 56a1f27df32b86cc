// TEST DOUBLE (see op_plugin/utils/op_api_common_base.h here): every tensor has the format recorder::npu_format() says (ND unless a scenario sets it).
#pragma once
#include <ATen/core/Tensor.h>
namespace at_npu::native {
int64_t get_npu_format(const at::Tensor& tensor);
at::Tensor npu_format_cast(const at::Tensor& tensor, int64_t format);
}  // namespace at_npu::native
