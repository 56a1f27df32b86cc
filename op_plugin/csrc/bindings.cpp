// ascend_ops._C: loading it registers the operators (schemas and CPU kernels); the
// Python functions below expose the shared validation to the reference and the fake
// kernels, so every implementation rejects bad input with the same message.
#include "aten_registration.h"
#include "validation.h"

#include <torch/extension.h>

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "ascend_ops native library: operator registration and shared validation";
  m.def("check_fused_linear_cross_entropy_loss_grad",
        &ascend_ops::check_fused_linear_cross_entropy_loss_grad, py::arg("grad"),
        py::arg("input"), py::arg("weight"), py::arg("target_mask"), py::arg("masked_target"),
        py::arg("label_smoothing"), py::arg("logits_max"), py::arg("sum_exp_logits"),
        py::arg("softmax"), py::arg("check_values"),
        "Raise TypeError/ValueError for input SPEC §1 rejects; check_values also reads "
        "masked_target (not possible on fake tensors).");
  m.def("check_batch_norm_reduce_backward", &ascend_ops::check_batch_norm_reduce_backward,
        py::arg("grad_out"), py::arg("input"), py::arg("mean"), py::arg("invstd"),
        py::arg("weight"), "Raise TypeError/ValueError for input SPEC §2 rejects.");
  m.def("check_fused_linear_online_max_sum", &ascend_ops::check_fused_linear_online_max_sum,
        py::arg("input"), py::arg("weight"), py::arg("target"), py::arg("vocab_start_index"),
        py::arg("vocab_end_index"), "Raise TypeError/ValueError for input SPEC §3 rejects.");
  m.def("check_fused_cross_entropy_loss_with_max_sum",
        &ascend_ops::check_fused_cross_entropy_loss_with_max_sum, py::arg("logits_max"),
        py::arg("sum_exp_logits"), py::arg("predicted_logits"), py::arg("label_smoothing"),
        py::arg("input"), py::arg("weight"), py::arg("vocab_parallel_logits"),
        "Raise TypeError/ValueError for input SPEC §3 rejects.");
  m.def("register_aten_batch_norm_backward_reduce_cpu",
        &ascend_ops::register_aten_batch_norm_backward_reduce_cpu,
        "Register the CPU kernel of aten::batch_norm_backward_reduce; the caller checks "
        "that none is registered. Returns false if this library already registered it.");
  m.def("batch_norm_reduce_output_dtype", &ascend_ops::batch_norm_reduce_output_dtype,
        py::arg("input_dtype"), py::arg("mean_dtype"),
        "dtype of the batch_norm_reduce_backward sums, as the CPU and NPU kernels choose it.");
}
