// CPU kernel of batch_norm_reduce_backward (SPEC §2).
//
// input and grad_out are read as [N, C, S] (S = product of the spatial dims). Each
// channel's N x S elements are cut into tasks of whole rows holding about
// kTaskElements elements; a task sums its rows with fp32 lane accumulators flushed into
// double every kBlockElements elements, and the task sums of a channel are added in task
// order. The cut depends only on the shape, so the result is the same bitwise for any
// thread count. Σ dy·(x − mean) is computed directly, never as Σ dy·x − mean·Σ dy,
// which cancels when |mean| ≫ std.
#include "../validation.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <vector>

namespace ascend_ops {
namespace {

constexpr int64_t kTaskElements = 1 << 15;
constexpr int64_t kBlockElements = 1 << 10;
constexpr int kLanes = 16;

struct ChannelSums {
  double dy = 0.0;
  double dy_xmu = 0.0;
};

// Adds Σ dy and Σ dy·(x − mean) over `len` contiguous elements to `sums`.
template <typename T>
void accumulate_row(const T* dy, const T* x, int64_t len, float mean, ChannelSums& sums) {
  for (int64_t start = 0; start < len; start += kBlockElements) {
    const int64_t stop = std::min(len, start + kBlockElements);
    std::array<float, kLanes> acc_dy{};
    std::array<float, kLanes> acc_dy_xmu{};
    int64_t j = start;
    for (; j + kLanes <= stop; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const float d = static_cast<float>(dy[j + l]);
        acc_dy[l] += d;
        acc_dy_xmu[l] += d * (static_cast<float>(x[j + l]) - mean);
      }
    }
    for (int l = 0; j < stop; ++j, ++l) {
      const float d = static_cast<float>(dy[j]);
      acc_dy[l] += d;
      acc_dy_xmu[l] += d * (static_cast<float>(x[j]) - mean);
    }
    // Pairwise fold of the lanes, then one rounding into double per block.
    for (int width = kLanes / 2; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) {
        acc_dy[l] += acc_dy[l + width];
        acc_dy_xmu[l] += acc_dy_xmu[l + width];
      }
    }
    sums.dy += acc_dy[0];
    sums.dy_xmu += acc_dy_xmu[0];
  }
}

template <typename T>
std::vector<ChannelSums> channel_sums(const at::Tensor& grad_out, const at::Tensor& input,
                                      const at::Tensor& mean) {
  const int64_t n = input.size(0);
  const int64_t c = input.size(1);
  const int64_t s = input.numel() / std::max<int64_t>(1, n * c);
  std::vector<ChannelSums> result(c);
  if (input.numel() == 0) {
    return result;
  }
  const int64_t rows_per_task = std::clamp<int64_t>(kTaskElements / s, 1, n);
  const int64_t tasks_per_channel = (n + rows_per_task - 1) / rows_per_task;
  std::vector<ChannelSums> task_sums(c * tasks_per_channel);
  const T* dy = grad_out.const_data_ptr<T>();
  const T* x = input.const_data_ptr<T>();
  const float* m = mean.const_data_ptr<float>();

  at::parallel_for(0, c * tasks_per_channel, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t channel = task / tasks_per_channel;
      const int64_t row0 = (task % tasks_per_channel) * rows_per_task;
      const int64_t row1 = std::min(n, row0 + rows_per_task);
      ChannelSums& sums = task_sums[task];
      for (int64_t row = row0; row < row1; ++row) {
        const int64_t offset = (row * c + channel) * s;
        accumulate_row(dy + offset, x + offset, s, m[channel], sums);
      }
    }
  });
  for (const auto channel : c10::irange(c)) {
    for (const auto t : c10::irange(tasks_per_channel)) {
      result[channel].dy += task_sums[channel * tasks_per_channel + t].dy;
      result[channel].dy_xmu += task_sums[channel * tasks_per_channel + t].dy_xmu;
    }
  }
  return result;
}

using MaybeTensor = std::optional<at::Tensor>;

std::tuple<MaybeTensor, MaybeTensor, MaybeTensor, MaybeTensor> batch_norm_reduce_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, bool input_g,
    bool weight_g, bool bias_g) {
  check_batch_norm_reduce_backward(grad_out, input, mean, invstd, weight);
  if (!input_g && !weight_g && !bias_g) {
    return {};
  }
  const at::Tensor grad_out_c = grad_out.contiguous();
  const at::Tensor input_c = input.contiguous();
  const at::Tensor mean_f = mean.to(at::kFloat).contiguous();
  const at::Tensor invstd_f = invstd.to(at::kFloat).contiguous();

  std::vector<ChannelSums> sums;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(),
                                  "batch_norm_reduce_backward", [&] {
    sums = channel_sums<scalar_t>(grad_out_c, input_c, mean_f);
  });

  // Assembled in double, rounded once into the output dtype.
  const int64_t c = input.size(1);
  const float* inv = invstd_f.const_data_ptr<float>();
  at::Tensor sum_dy = at::empty({c}, input.options().dtype(at::kDouble));
  at::Tensor sum_dy_xmu = at::empty({c}, input.options().dtype(at::kDouble));
  at::Tensor grad_weight = at::empty({c}, input.options().dtype(at::kDouble));
  double* p_dy = sum_dy.mutable_data_ptr<double>();
  double* p_dy_xmu = sum_dy_xmu.mutable_data_ptr<double>();
  double* p_gw = grad_weight.mutable_data_ptr<double>();
  for (const auto channel : c10::irange(c)) {
    p_dy[channel] = sums[channel].dy;
    p_dy_xmu[channel] = sums[channel].dy_xmu;
    p_gw[channel] = sums[channel].dy_xmu * static_cast<double>(inv[channel]);
  }
  const at::ScalarType out_type =
      batch_norm_reduce_output_dtype(input.scalar_type(), mean.scalar_type());
  const auto out = [&](bool wanted, const at::Tensor& t) -> MaybeTensor {
    return wanted ? MaybeTensor(t.to(out_type)) : std::nullopt;
  };
  return {out(input_g, sum_dy), out(input_g, sum_dy_xmu), out(weight_g, grad_weight),
          out(bias_g, sum_dy)};
}

}  // namespace

TORCH_LIBRARY_IMPL(ascend_ops, CPU, m) {
  m.impl("batch_norm_reduce_backward", &batch_norm_reduce_backward_cpu);
}

}  // namespace ascend_ops
