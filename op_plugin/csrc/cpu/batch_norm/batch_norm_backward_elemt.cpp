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
  double total = 0.0;
  for (const double rows : cpu::doubles(count)) {
    total += rows;
  }
  TORCH_CHECK_VALUE(total > 0.0, "batch_norm_backward_elemt: 'count' must sum to the rows of "
                    "every rank (> 0 when input has elements), got ", total);
  const at::Tensor dy = cpu::same_layout(grad_out, x);
  // Per channel in double (read in place, no tensor ops): mean, k, mean_dy, scale.
  const int64_t c = x.size(1);
  const std::vector<double> inv64 = cpu::doubles(invstd);
  const std::vector<double> mean64 = cpu::doubles(mean);
  std::vector<double> mean_dy64 = cpu::doubles(sum_dy);
  std::vector<double> k64 = cpu::doubles(sum_dy_xmu);
  const std::vector<double> scale64 = cpu::invstd_times_weight(invstd, weight);
  for (int64_t i = 0; i < c; ++i) {
    mean_dy64[i] = mean_dy64[i] / total;
    k64[i] = k64[i] / total * inv64[i] * inv64[i];
  }

  const cpu::BnShape shape = cpu::bn_shape(x);
  const auto& loops = cpu::bn_loops();
  const cpu::BnElem type = cpu::bn_elem(x.scalar_type());
  const auto* xb = static_cast<const char*>(x.const_data_ptr());
  const auto* dyb = static_cast<const char*>(dy.const_data_ptr());
  auto* dxb = static_cast<char*>(dx.mutable_data_ptr());
  const int64_t item = x.element_size();
  if (shape.layout == cpu::BnLayout::kRuns) {
    at::parallel_for(0, shape.n * shape.c, cpu::bn_grain(shape.s), [&](int64_t begin, int64_t end) {
      for (int64_t run = begin; run < end; ++run) {
        const int64_t channel = run % shape.c;
        const int64_t offset = run * shape.s * item;
        loops.backward_elemt_run(type, dyb + offset, xb + offset, dxb + offset, shape.s,
                                 mean64[channel], k64[channel], mean_dy64[channel],
                                 scale64[channel]);
      }
    });
  } else {
    const at::ScalarType compute = cpu::bn_compute_type(x.scalar_type());
    const cpu::ComputeValues m(mean64, compute), k(k64, compute), d(mean_dy64, compute),
        sc(scale64, compute);
    at::parallel_for(0, shape.rows(), cpu::bn_grain(shape.c), [&](int64_t begin, int64_t end) {
      const int64_t offset = begin * shape.c * item;
      loops.backward_elemt_rows(type, dyb + offset, xb + offset, dxb + offset, end - begin,
                                shape.c, shape.c, m.data(), k.data(), d.data(), sc.data());
    });
  }
  return dx;
}

}  // namespace ascend_ops
