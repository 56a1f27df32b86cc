// CPU kernel of aten::batch_norm_backward_elemt (SPEC §2b): grad_input of batch norm
// from the all-reduced sums, in input's dtype and layout, one read of grad_out and input
// and one write.
//
// With N = Σ count (every rank's rows), per channel in double:
//   mean_dy = sum_dy / N,  k = sum_dy_xmu / N · invstd²,  scale = invstd · weight,
//   dx = (dy − mean_dy − (x − mean) · k) · scale.
// grad_out is read in input's layout (copied there if it differs). Element-wise, so the
// result does not depend on the thread count.
#include "../../validation.h"
#include "batch_norm_kernels.h"
#include "batch_norm_layout.h"

#include <ATen/Parallel.h>

namespace ascend_ops {

at::Tensor batch_norm_backward_elemt_cpu(
    const at::Tensor& grad_out, const at::Tensor& input_arg, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, const at::Tensor& sum_dy,
    const at::Tensor& sum_dy_xmu, const at::Tensor& count) {
  check_batch_norm_backward_elemt(grad_out, input_arg, mean, invstd, weight, sum_dy, sum_dy_xmu,
                                  count);
  const at::Tensor x = cpu::readable(input_arg);
  at::Tensor dx = at::empty_like(x);
  if (x.numel() == 0) {
    return dx;
  }
  const double total = count.to(at::kDouble).sum().item<double>();
  TORCH_CHECK_VALUE(total > 0.0, "batch_norm_backward_elemt: 'count' must sum to the rows of "
                    "every rank (> 0 when input has elements), got ", total);
  const at::Tensor dy = cpu::same_layout(grad_out, x);
  const at::Tensor inv64 = invstd.to(at::kDouble);
  const at::Tensor mean64 = mean.to(at::kDouble).contiguous();
  const at::Tensor mean_dy64 = (sum_dy.to(at::kDouble) / total).contiguous();
  const at::Tensor k64 = (sum_dy_xmu.to(at::kDouble) / total * inv64 * inv64).contiguous();
  const at::Tensor scale64 =
      (weight.has_value() ? inv64 * weight->to(at::kDouble) : inv64).contiguous();

  const cpu::BnShape shape = cpu::bn_shape(x);
  const auto& loops = cpu::bn_loops();
  const cpu::BnElem type = cpu::bn_elem(x.scalar_type());
  const auto* xb = static_cast<const char*>(x.const_data_ptr());
  const auto* dyb = static_cast<const char*>(dy.const_data_ptr());
  auto* dxb = static_cast<char*>(dx.mutable_data_ptr());
  const int64_t item = x.element_size();
  if (shape.layout == cpu::BnLayout::kRuns) {
    const double* pm = mean64.const_data_ptr<double>();
    const double* pk = k64.const_data_ptr<double>();
    const double* pd = mean_dy64.const_data_ptr<double>();
    const double* ps = scale64.const_data_ptr<double>();
    at::parallel_for(0, shape.n * shape.c, cpu::bn_grain(shape.s), [&](int64_t begin, int64_t end) {
      for (int64_t run = begin; run < end; ++run) {
        const int64_t channel = run % shape.c;
        const int64_t offset = run * shape.s * item;
        loops.backward_elemt_run(type, dyb + offset, xb + offset, dxb + offset, shape.s,
                                 pm[channel], pk[channel], pd[channel], ps[channel]);
      }
    });
  } else {
    const at::ScalarType compute = cpu::bn_compute_type(x.scalar_type());
    const at::Tensor m = cpu::per_channel(mean64, compute), k = cpu::per_channel(k64, compute),
                     d = cpu::per_channel(mean_dy64, compute),
                     sc = cpu::per_channel(scale64, compute);
    at::parallel_for(0, shape.rows(), cpu::bn_grain(shape.c), [&](int64_t begin, int64_t end) {
      const int64_t offset = begin * shape.c * item;
      loops.backward_elemt_rows(type, dyb + offset, xb + offset, dxb + offset, end - begin,
                                shape.c, shape.c, m.const_data_ptr(), k.const_data_ptr(),
                                d.const_data_ptr(), sc.const_data_ptr());
    });
  }
  return dx;
}

}  // namespace ascend_ops
