// The CPU kernels of the sync-BN family (SPEC §2, §2b), registered for aten's ops of the
// same names by aten_batch_norm.cpp. Each validates its arguments first.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace ascend_ops {

// (mean, invstd) per channel, float32 (float64 for a float64 input).
std::tuple<at::Tensor, at::Tensor> batch_norm_stats_cpu(const at::Tensor& input, double eps);

// The same statistics before batch_norm_stats rounds them: float64 for every input dtype.
// SyncBatchNorm gathers these on CPU: a float32 mean at |mean| >> std (1e4 + N(0, 1):
// steps of 1e-3) would cost the global variance ~1e-4 of its value.
std::tuple<at::Tensor, at::Tensor> batch_norm_stats_float64_cpu(const at::Tensor& input,
                                                                double eps);

// Global (mean, invstd) from per-rank rows of mean/invstd weighted by counts; updates
// running_mean/running_var in place.
std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats_with_counts_cpu(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    double momentum, double eps, const at::Tensor& counts);

// (input − mean) · invstd · weight + bias, in input's dtype and layout.
at::Tensor batch_norm_elemt_cpu(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                                const at::Tensor& invstd, double eps);

// grad_input of batch norm from the all-reduced sums, in input's dtype and layout.
at::Tensor batch_norm_backward_elemt_cpu(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, const at::Tensor& sum_dy,
    const at::Tensor& sum_dy_xmu, const at::Tensor& count);

// aten::batch_norm_backward_reduce: batch_norm_reduce_backward plus float64; outputs
// not asked for are undefined tensors.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_reduce_cpu(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, bool input_g,
    bool weight_g, bool bias_g);

}  // namespace ascend_ops
