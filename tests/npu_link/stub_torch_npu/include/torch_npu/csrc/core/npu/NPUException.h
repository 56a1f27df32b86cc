// TEST DOUBLE (see op_plugin/utils/op_api_common_base.h here).
#pragma once
namespace c10_npu {
const char* c10_npu_get_error_message();
}
