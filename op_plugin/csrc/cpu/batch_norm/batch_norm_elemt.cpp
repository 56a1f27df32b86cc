// CPU kernel of aten::batch_norm_elemt (SPEC §2b): y = (x − mean) · invstd · weight + bias
// in input's dtype and layout, one read of x and one write of y.
//
// Per channel scale = invstd · weight is folded first (in double, rounded once to the
// compute type); y = (x − mean) · scale + bias keeps x − mean before the multiply, so a
// large mean (x ≈ 1e4, std 1) loses nothing to cancellation. Runs layout: one item per
// (n, c) run of S elements; rows layout: blocks of rows of C channels. Element-wise, so
// the result does not depend on the thread count.
#include "../../validation.h"
#include "batch_norm_kernels.h"
#include "batch_norm_layout.h"

#include <ATen/Parallel.h>

namespace ascend_ops {

at::Tensor batch_norm_elemt_cpu(const at::Tensor& input_arg, const std::optional<at::Tensor>& weight,
                                const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                                const at::Tensor& invstd, double /*eps: folded into invstd*/) {
  check_batch_norm_elemt(input_arg, weight, bias, mean, invstd);
  const at::Tensor x = cpu::readable(input_arg);
  at::Tensor y = at::empty_like(x);
  if (x.numel() == 0) {
    return y;
  }
  const at::ScalarType compute = cpu::bn_compute_type(x.scalar_type());
  const at::Tensor mean64 = mean.to(at::kDouble);
  at::Tensor scale64 = invstd.to(at::kDouble);
  if (weight.has_value()) {
    scale64 = scale64 * weight->to(at::kDouble);
  }
  const at::Tensor bias64 = bias.has_value() ? bias->to(at::kDouble).contiguous()
                                             : at::zeros_like(mean64);
  const cpu::BnShape shape = cpu::bn_shape(x);
  const auto& loops = cpu::bn_loops();
  const cpu::BnElem type = cpu::bn_elem(x.scalar_type());
  const auto* xb = static_cast<const char*>(x.const_data_ptr());
  auto* yb = static_cast<char*>(y.mutable_data_ptr());
  const int64_t item = x.element_size();
  if (shape.layout == cpu::BnLayout::kRuns) {
    const at::Tensor m = mean64.contiguous(), sc = scale64.contiguous();
    const double* pm = m.const_data_ptr<double>();
    const double* ps = sc.const_data_ptr<double>();
    const double* pb = bias64.const_data_ptr<double>();
    at::parallel_for(0, shape.n * shape.c, cpu::bn_grain(shape.s), [&](int64_t begin, int64_t end) {
      for (int64_t run = begin; run < end; ++run) {
        const int64_t channel = run % shape.c;
        loops.elemt_run(type, xb + run * shape.s * item, yb + run * shape.s * item, shape.s,
                        pm[channel], ps[channel], pb[channel]);
      }
    });
  } else {
    const at::Tensor m = cpu::per_channel(mean64, compute), sc = cpu::per_channel(scale64, compute),
                     b = cpu::per_channel(bias64, compute);
    at::parallel_for(0, shape.rows(), cpu::bn_grain(shape.c), [&](int64_t begin, int64_t end) {
      loops.elemt_rows(type, xb + begin * shape.c * item, yb + begin * shape.c * item, end - begin,
                       shape.c, shape.c, m.const_data_ptr(), sc.const_data_ptr(), b.const_data_ptr());
    });
  }
  return y;
}

}  // namespace ascend_ops
