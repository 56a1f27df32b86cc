// ascend_ops._npu: importing it (after torch_npu) registers the NPU kernels for the
// PrivateUse1 dispatch key (register_npu.cpp, generated from the op yaml) and exposes
// what the Python side needs: the custom-package kernels (impl="npu_custom"), which
// aclnn ops resolve, and how the adapter refuses and checks.
#include "aclnn_call.h"
#include "flce_options_custom.h"
#include "builtin_limits_py.h"
#include "npu_tensors.h"

#include <torch/extension.h>

#define ASCEND_OPS_STR2(x) #x
#define ASCEND_OPS_STR(x) ASCEND_OPS_STR2(x)

namespace {

// [(op, builtin aclnn name, CANN release, custom aclnn name or None)] of this build.
py::list npu_ops() {
  py::list ops;
  for (const ascend_ops::npu::NpuOp& op : ascend_ops::npu::kNpuOps) {
    ops.append(py::make_tuple(op.op, op.builtin->name, op.builtin->cann,
                              op.custom != nullptr ? py::object(py::str(op.custom->name))
                                                   : py::object(py::none())));
  }
  return ops;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace npu = ascend_ops::npu;
  m.doc() = "ascend_ops NPU adapter: aclnn kernels registered for PrivateUse1 via torch_npu";
  m.attr("torch_npu_version") = ASCEND_OPS_STR(ASCEND_OPS_TORCH_NPU_VERSION);
  m.def("npu_ops", &npu_ops,
        "[(op, aclnn name, CANN release, custom package's aclnn name or None)] of this build.");
  m.def("aclnn_available", &npu::aclnn_available, py::arg("name"),
        "Whether aclnn `name` and its GetWorkspaceSize resolve (custom op packages on "
        "ASCEND_CUSTOM_OPP_PATH and the vendors config.ini first, then CANN's libopapi.so).");
  m.def("require_aclnn",
        [](const std::string& name, const std::string& cann, bool custom) {
          npu::resolve_aclnn({name.c_str(), cann.c_str(), custom});
        },
        py::arg("name"), py::arg("cann"), py::arg("custom") = false,
        "Raise NotImplementedError naming `name` and what to install if it does not resolve.");
  m.def("describe_status", &npu::describe_status, py::arg("status"),
        "An aclnn status code with its meaning, as the adapter's errors print it.");
  m.def("target_check_mode", &npu::target_check_mode,
        "How masked_target's range is checked on NPU tensors: 'device', 'host' or 'off'.");
  npu::def_builtin_limits(m);
  // impl="npu_custom": the same kernels on our op package's entry points.
  m.def("fused_linear_cross_entropy_loss_grad_custom",
        &npu::fused_linear_cross_entropy_loss_grad_custom, py::arg("grad"), py::arg("input"),
        py::arg("weight"), py::arg("target_mask"), py::arg("masked_target"),
        py::arg("label_smoothing"), py::arg("logits_max"), py::arg("sum_exp_logits"),
        py::arg("softmax"), py::arg("scratch_bytes") = py::none(),
        // Without the GIL, as torch_npu's own op calls run: its RunOpApi may release the
        // GIL and throw (OpParamMaker.cpp:251-258), which entered with it held aborts the
        // interpreter on a failed launch with TASK_QUEUE_ENABLE=0.
        py::call_guard<py::gil_scoped_release>());
  // linear_cross_entropy's loss options in the npu_custom backward (options_support.py).
  m.def("fused_linear_cross_entropy_loss_grad_options_custom",
        &npu::fused_linear_cross_entropy_loss_grad_options_custom, py::arg("input"),
        py::arg("weight"), py::arg("target_mask"), py::arg("masked_target"),
        py::arg("logits_max"), py::arg("sum_exp_logits"), py::arg("alpha"), py::arg("beta"),
        py::arg("gamma"), py::arg("bias"), py::arg("class_weight"), py::arg("logit_scale"),
        py::arg("softcap"), py::call_guard<py::gil_scoped_release>());
  m.def("batch_norm_reduce_backward_custom", &npu::batch_norm_reduce_backward_custom,
        py::arg("grad_out"), py::arg("input"), py::arg("mean"), py::arg("invstd"),
        py::arg("weight"), py::arg("input_g"), py::arg("weight_g"), py::arg("bias_g"),
        py::call_guard<py::gil_scoped_release>());
}
