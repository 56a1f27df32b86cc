// ascend_ops._npu: importing it (after torch_npu) registers the NPU kernels for the
// PrivateUse1 dispatch key (register_npu.cpp, generated from the op yaml) and exposes
// what the Python side needs to explain itself.
#include "aclnn_call.h"

#include <torch/extension.h>

#define ASCEND_OPS_STR2(x) #x
#define ASCEND_OPS_STR(x) ASCEND_OPS_STR2(x)

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "ascend_ops NPU adapter: aclnn kernels registered for PrivateUse1 via torch_npu";
  m.attr("torch_npu_version") = ASCEND_OPS_STR(ASCEND_OPS_TORCH_NPU_VERSION);
  m.def("aclnn_available", &ascend_ops::npu::aclnn_available, py::arg("name"),
        "Whether aclnn `name` and its GetWorkspaceSize resolve (custom op packages on "
        "ASCEND_CUSTOM_OPP_PATH first, then CANN's libopapi.so).");
  m.def("require_aclnn",
        [](const std::string& name, const std::string& cann) {
          ascend_ops::npu::resolve_aclnn({name.c_str(), cann.c_str()});
        },
        py::arg("name"), py::arg("cann"),
        "Raise NotImplementedError naming `name` and what to install if it does not resolve.");
}
