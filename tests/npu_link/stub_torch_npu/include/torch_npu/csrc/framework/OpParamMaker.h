// TEST DOUBLE (see op_plugin/utils/op_api_common_base.h here).
#pragma once
#include <cstdint>
namespace at_npu::native {
void ApplyDeterministicLevel(int64_t level, bool deterministic_algorithms, bool is_opapi);
}
