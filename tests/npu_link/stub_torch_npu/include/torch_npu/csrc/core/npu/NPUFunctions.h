// TEST DOUBLE (see op_plugin/utils/op_api_common_base.h here).
#pragma once
#include <cstdint>
namespace c10_npu {
uint32_t GetDeterministicLevel();
}
