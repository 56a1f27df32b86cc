// ascend_ops._C: loading it registers the operators (schemas and CPU kernels); the
// Python functions below expose the shared validation to the reference and the fake
// kernels, so every implementation rejects bad input with the same message.
#include "aten_registration.h"
#include "cpu/batch_norm_loops.h"
#include "cpu/bf16_gemm.h"
#include "validation.h"

#include <torch/extension.h>

namespace {

// a @ b for 2-D bfloat16 CPU tensors of any strides, fp32 result, on the fast path's
// own GEMM: lets the benchmark and the tests measure and check it alone.
at::Tensor bf16_matmul(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(ascend_ops::cpu::avx512_kernels_supported(),
              "bf16_matmul: this CPU lacks AVX512-BF16");
  TORCH_CHECK_VALUE(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
                    "bf16_matmul: expected [m, k] @ [k, n], got ", a.sizes(), " @ ", b.sizes());
  TORCH_CHECK_TYPE(a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16 &&
                       a.device().is_cpu() && b.device().is_cpu(),
                   "bf16_matmul: expected bfloat16 CPU tensors");
  at::Tensor c = at::empty({a.size(0), b.size(1)}, a.options().dtype(at::kFloat));
  const auto view = [](const at::Tensor& t) {
    return ascend_ops::cpu::Bf16View{reinterpret_cast<const uint16_t*>(t.const_data_ptr()),
                                     t.stride(0), t.stride(1)};
  };
  ascend_ops::cpu::bf16_gemm(view(a), view(b), a.size(0), b.size(1), a.size(1),
                             c.mutable_data_ptr<float>(), c.size(1), false);
  return c;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "ascend_ops native library: operator registration and shared validation";
  m.def("check_fused_linear_cross_entropy_loss_grad",
        &ascend_ops::check_fused_linear_cross_entropy_loss_grad, py::arg("grad"),
        py::arg("input"), py::arg("weight"), py::arg("target_mask"), py::arg("masked_target"),
        py::arg("label_smoothing"), py::arg("logits_max"), py::arg("sum_exp_logits"),
        py::arg("softmax"), py::arg("check_values"),
        "Raise TypeError/ValueError for input SPEC §1 rejects; check_values also reads "
        "masked_target (not possible on fake tensors).");
  m.def("check_scratch_bytes", &ascend_ops::check_scratch_bytes, py::arg("op"),
        py::arg("scratch_bytes"), "Raise ValueError unless scratch_bytes is None or > 0.");
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
  m.def("aten_batch_norm_ops", &ascend_ops::aten_batch_norm_ops,
        "The aten sync-BN operators ascend_ops can serve on CPU.");
  m.def("register_aten_batch_norm_cpu", &ascend_ops::register_aten_batch_norm_cpu,
        py::arg("op"),
        "Register our CPU kernel of aten::<op>; the caller checks that none is registered. "
        "Returns false if this library already registered it.");
  m.def("cpu_batch_norm_engine", [] { return std::string(ascend_ops::cpu::bn_loops().engine); },
        "The build of the batch-norm loops this CPU runs: 'avx512' or 'portable'.");
  m.def("batch_norm_reduce_output_dtype", &ascend_ops::batch_norm_reduce_output_dtype,
        py::arg("input_dtype"), py::arg("mean_dtype"),
        "dtype of the batch_norm_reduce_backward sums, as the CPU and NPU kernels choose it.");
  m.def("cpu_avx512_kernels_supported", &ascend_ops::cpu::avx512_kernels_supported,
        "Whether this CPU runs the bfloat16 fast path (AVX512-BF16).");
  m.def("cpu_bf16_matmul", &bf16_matmul, py::arg("a"), py::arg("b"),
        "a @ b in fp32 on the fast path's bf16 GEMM (for benchmarks and tests).");
}
