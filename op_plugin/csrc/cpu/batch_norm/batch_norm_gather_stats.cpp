// CPU kernel of aten::batch_norm_gather_stats_with_counts (SPEC §2b): the global
// per-channel mean and invstd from each rank's (mean, invstd, count), and the running
// statistics' update.
//
// Per channel, in double, over the ranks w with count_w > 0 (a rank with no rows sends
// zeros and is skipped: its invstd 0 would make 0 · inf):
//   n = Σ count_w,  mean = Σ count_w · mean_w / n,
//   M2 = Σ count_w · (var_w + (mean_w − mean)²),  var_w = 1/invstd_w² − eps,
//   invstd = 1 / sqrt(M2 / n + eps),
//   running_mean ← (1 − momentum) · running_mean + momentum · mean,
//   running_var  ← (1 − momentum) · running_var  + momentum · M2 / (n − 1)  (unbiased).
// The caller's running statistics are validated with everything else (validation.cpp) and
// written only at the end, both or neither.
// With n = 0 (every rank empty) mean is 0, invstd NaN and the running statistics are
// left as they are (CUDA's kernel would decay them towards 0).
// The inputs are [world, C]: small, so this is a plain loop.
#include "../../validation.h"
#include "batch_norm_kernels.h"
#include "batch_norm_layout.h"

#include <ATen/core/Tensor.h>
#include <c10/util/irange.h>

#include <cmath>

namespace ascend_ops {

std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats_with_counts_cpu(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    double momentum, double eps, const at::Tensor& counts) {
  check_batch_norm_gather_stats(input, mean, invstd, running_mean, running_var, eps, counts);
  const int64_t world = mean.size(0);
  const int64_t c = mean.size(1);
  // The inputs read in double, in place (cpu::doubles: no tensor ops on these small ones).
  const std::vector<double> counts64 = cpu::doubles(counts);
  const double* count = counts64.data();
  for (const auto w : c10::irange(world)) {
    TORCH_CHECK_VALUE(std::isfinite(count[w]) && count[w] >= 0.0,
                      "batch_norm_gather_stats_with_counts: 'counts' must be finite and >= 0 "
                      "(rows per rank), got counts[", w, "] = ", count[w]);
  }
  const std::vector<double> mean_all = cpu::doubles(mean);      // [world, C], row-major
  const std::vector<double> invstd_all = cpu::doubles(invstd);  // [world, C]
  const double* m = mean_all.data();
  const double* inv = invstd_all.data();

  std::vector<double> gm(c), gi(c), uv(c);
  double n = 0.0;
  for (const auto w : c10::irange(world)) {
    n += count[w];
  }
  for (const auto channel : c10::irange(c)) {
    double weighted = 0.0;
    for (const auto w : c10::irange(world)) {
      if (count[w] > 0.0) {
        weighted += count[w] * m[w * c + channel];
      }
    }
    const double avg = n > 0.0 ? weighted / n : 0.0;
    double m2 = 0.0;
    for (const auto w : c10::irange(world)) {
      if (count[w] > 0.0) {
        const double sd = 1.0 / inv[w * c + channel];
        const double d = m[w * c + channel] - avg;
        m2 += count[w] * (sd * sd - eps + d * d);
      }
    }
    gm[channel] = avg;
    gi[channel] = n > 0.0 ? 1.0 / std::sqrt(m2 / n + eps) : NAN;
    uv[channel] = m2 / (n - 1.0);  // n = 1: inf or NaN, as CUDA gives
  }
  if (n > 0.0) {
    // Both updates are formed first and written last, so nothing can fail between the writes.
    const auto updated = [&](const at::Tensor& running, const std::vector<double>& batch) {
      std::vector<double> values = cpu::doubles(running);
      for (const auto channel : c10::irange(c)) {
        values[channel] = values[channel] * (1.0 - momentum) + batch[channel] * momentum;
      }
      return cpu::tensor_of(values, running.scalar_type(), running.options());
    };
    at::Tensor new_mean, new_var;
    if (running_mean.has_value()) {
      new_mean = updated(*running_mean, gm);
    }
    if (running_var.has_value()) {
      new_var = updated(*running_var, uv);
    }
    if (running_mean.has_value()) {
      running_mean->copy_(new_mean);
    }
    if (running_var.has_value()) {
      running_var->copy_(new_var);
    }
  }
  return {cpu::tensor_of(gm, mean.scalar_type(), mean.options()),
          cpu::tensor_of(gi, mean.scalar_type(), mean.options())};
}

}  // namespace ascend_ops
