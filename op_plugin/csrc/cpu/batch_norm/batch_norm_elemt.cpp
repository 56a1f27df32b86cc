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
  // Per channel in double: mean, scale = invstd · weight, bias (read in place, no tensor ops).
  const int64_t c = x.size(1);
  const std::vector<double> mean64 = cpu::doubles(mean);
  const std::vector<double> scale64 = cpu::invstd_times_weight(invstd, weight);
  const std::vector<double> bias64 =
      bias.has_value() ? cpu::doubles(*bias) : std::vector<double>(c, 0.0);
  const cpu::BnShape shape = cpu::bn_shape(x);
  const auto& loops = cpu::bn_loops();
  const cpu::BnElem type = cpu::bn_elem(x.scalar_type());
  const auto* xb = static_cast<const char*>(x.const_data_ptr());
  auto* yb = static_cast<char*>(y.mutable_data_ptr());
  const int64_t item = x.element_size();
  if (shape.layout == cpu::BnLayout::kRuns) {
    at::parallel_for(0, shape.n * shape.c, cpu::bn_grain(shape.s), [&](int64_t begin, int64_t end) {
      for (int64_t run = begin; run < end; ++run) {
        const int64_t channel = run % shape.c;
        loops.elemt_run(type, xb + run * shape.s * item, yb + run * shape.s * item, shape.s,
                        mean64[channel], scale64[channel], bias64[channel]);
      }
    });
  } else {
    const at::ScalarType compute = cpu::bn_compute_type(x.scalar_type());
    const cpu::ComputeValues m(mean64, compute), sc(scale64, compute), b(bias64, compute);
    at::parallel_for(0, shape.rows(), cpu::bn_grain(shape.c), [&](int64_t begin, int64_t end) {
      loops.elemt_rows(type, xb + begin * shape.c * item, yb + begin * shape.c * item, end - begin,
                       shape.c, shape.c, m.data(), sc.data(), b.data());
    });
  }
  return y;
}

}  // namespace ascend_ops
