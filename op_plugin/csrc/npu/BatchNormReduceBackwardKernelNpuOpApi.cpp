// NPU kernel of batch_norm_reduce_backward (SPEC §2): the shared validation, then
// aclnnBatchNormReduceBackward (impl="npu", CANN's built-in) or
// aclnnAscendOpsBatchNormReduceBackward (impl="npu_custom", our op package) through one
// code path, with the outputs allocated as torch_npu allocates them (float16 sums only
// when input and mean are both float16, float32 otherwise) and the gaps of the op filled:
//   - an input with no elements: the op leaves its outputs unwritten, we zero them;
//   - internal formats (e.g. NC1HWC0) cast to their base format; strided views (e.g.
//     channels_last) passed as they are to CANN's built-in (it makes them contiguous
//     itself), made contiguous for our package.
#include "aclnn_call.h"
#include "npu_tensors.h"

#include "../validation.h"

#include "torch_npu/csrc/core/npu/NPUGuard.h"

namespace ascend_ops::npu {
namespace {

using MaybeTensor = std::optional<at::Tensor>;
using BnOutputs = std::tuple<MaybeTensor, MaybeTensor, MaybeTensor, MaybeTensor>;

BnOutputs run_bn_reduce_backward(const AclnnOp& op, const at::Tensor& grad_out,
                                 const at::Tensor& input, const at::Tensor& mean,
                                 const at::Tensor& invstd, const MaybeTensor& weight,
                                 bool input_g, bool weight_g, bool bias_g) {
  check_batch_norm_reduce_backward(grad_out, input, mean, invstd, weight);
  if (!input_g && !weight_g && !bias_g) {
    return {};
  }
  const c10_npu::NPUGuard guard(input.device());
  const at::TensorOptions options = input.options().dtype(
      batch_norm_reduce_output_dtype(input.scalar_type(), mean.scalar_type()));
  const int64_t channels = input.size(1);
  const auto output = [&](bool wanted) -> MaybeTensor {
    return wanted ? MaybeTensor(at::empty({channels}, options)) : std::nullopt;
  };
  MaybeTensor sum_dy = output(input_g);       // [C]
  MaybeTensor sum_dy_xmu = output(input_g);   // [C]
  MaybeTensor grad_weight = output(weight_g); // [C]
  MaybeTensor grad_bias = output(bias_g);     // [C]

  if (input.numel() == 0) {
    for (MaybeTensor* t : {&sum_dy, &sum_dy_xmu, &grad_weight, &grad_bias}) {
      if (t->has_value()) {
        (*t)->zero_();
      }
    }
    return {sum_dy, sum_dy_xmu, grad_weight, grad_bias};
  }

  const Strides strides = op.custom ? Strides::kContiguousOnly : Strides::kAnyView;
  at::Tensor grad_out_c = as_aclnn_input(grad_out, strides);
  at::Tensor input_c = as_aclnn_input(input, strides);
  at::Tensor mean_c = as_aclnn_input(mean, strides);
  at::Tensor invstd_c = as_aclnn_input(invstd, strides);
  MaybeTensor weight_c =
      weight.has_value() ? MaybeTensor(as_aclnn_input(*weight, strides)) : std::nullopt;
  run_aclnn<BnReducePhase1>(op, nullptr, grad_out_c, input_c, mean_c, invstd_c, weight_c,
                            input_g, weight_g, bias_g, sum_dy, sum_dy_xmu, grad_weight,
                            grad_bias);
  return {sum_dy, sum_dy_xmu, grad_weight, grad_bias};
}

}  // namespace

BnOutputs batch_norm_reduce_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                     const at::Tensor& mean, const at::Tensor& invstd,
                                     const MaybeTensor& weight, bool input_g, bool weight_g,
                                     bool bias_g) {
  return run_bn_reduce_backward(k_batch_norm_reduce_backward, grad_out, input, mean, invstd,
                                weight, input_g, weight_g, bias_g);
}

BnOutputs batch_norm_reduce_backward_custom(const at::Tensor& grad_out, const at::Tensor& input,
                                            const at::Tensor& mean, const at::Tensor& invstd,
                                            const MaybeTensor& weight, bool input_g,
                                            bool weight_g, bool bias_g) {
  return run_bn_reduce_backward(k_batch_norm_reduce_backward_custom, grad_out, input, mean,
                                invstd, weight, input_g, weight_g, bias_g);
}

}  // namespace ascend_ops::npu
