// CPU kernel of batch_norm_reduce_backward (SPEC §2).
//
// One pass over grad_out and input computes both sums, Σ dy and Σ dy·(x − mean)
// (directly: Σ dy·x − mean·Σ dy cancels when |mean| ≫ std), in fp32 lane accumulators
// flushed into double per block. Two layouts are read in place:
//   * channels outer (contiguous [N, C, *]): per (n, c) a run of S contiguous elements;
//     tasks are (channel, block of rows) holding about kTaskElements elements, so the
//     work spreads over channels when C is large and over N x S when C is small;
//   * channels inner (channels_last, or S == 1): rows of C contiguous channels; tasks
//     are (block of rows, block of channels).
// Any other layout is copied to contiguous first. The task cut depends on the shape
// only and the task sums are added in task order, so results are bitwise identical for
// any thread count. Scratch is per task, not per element: no tensor-sized temporaries.
#include "../validation.h"
#include "avx512_kernels.h"
#include "batch_norm_kernels.h"
#include "batch_norm_loops.h"
#include "engine_switch.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>  // at::internal::GRAIN_SIZE
#include <c10/util/irange.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

namespace ascend_ops {
namespace {

constexpr int64_t kTaskElements = 1 << 15;
constexpr int64_t kInnerTaskElements = 1 << 16;
constexpr int64_t kInnerChannelBlock = 256;

// Tasks per thread chunk so that a parallel region gets at least ~32K elements of work
// (ATen's grain): small inputs run on the calling thread, without a region's overhead.
int64_t task_grain(int64_t elements_per_task) {
  return std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(1, elements_per_task));
}

struct Sums {
  std::vector<double> dy, dy_xmu;
  explicit Sums(int64_t n) : dy(n, 0.0), dy_xmu(n, 0.0) {}
};

bool use_avx512() {
  return cpu::avx512_kernels_supported() && !cpu::portable_forced();  // engine_switch.h
}

template <typename T>
constexpr cpu::BnType bn_type() {
  if constexpr (std::is_same_v<T, at::BFloat16>) {
    return cpu::BnType::kBFloat16;
  } else if constexpr (std::is_same_v<T, at::Half>) {
    return cpu::BnType::kFloat16;
  } else {
    static_assert(std::is_same_v<T, float>);
    return cpu::BnType::kFloat32;
  }
}

// The type mean is read in: double for a float64 input (aten's registration), else float.
template <typename T>
using MeanT = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Portable twins of the AVX512 kernels, with the same blocking.
template <typename T>
void portable_run_sums(const T* dy, const T* x, int64_t runs, int64_t run_length,
                       int64_t run_stride, float mean, double* sum_dy, double* sum_dy_xmu) {
  constexpr int kLanes = 16;
  float a[kLanes] = {}, b[kLanes] = {};
  const auto flush = [&] {
    for (int l = 0; l < kLanes; ++l) {
      *sum_dy += a[l];
      *sum_dy_xmu += b[l];
      a[l] = b[l] = 0.0f;
    }
  };
  int64_t pending = 0;
  for (int64_t run = 0; run < runs; ++run) {
    const T* dy_run = dy + run * run_stride;
    const T* x_run = x + run * run_stride;
    for (int64_t start = 0; start < run_length; start += cpu::kBnFlush) {
      const int64_t stop = std::min(run_length, start + cpu::kBnFlush);
      for (int64_t j = start; j < stop; ++j) {
        const float d = static_cast<float>(dy_run[j]);
        a[j % kLanes] += d;
        b[j % kLanes] += d * (static_cast<float>(x_run[j]) - mean);
      }
      pending += stop - start;
      if (pending >= cpu::kBnFlush) {
        flush();
        pending = 0;
      }
    }
  }
  flush();
}

template <typename T>
void portable_rows_sums(const T* dy, const T* x, int64_t rows, int64_t channels,
                        int64_t row_stride, const float* mean, float* scratch, double* sum_dy,
                        double* sum_dy_xmu) {
  float* acc_dy = scratch;
  float* acc_dy_xmu = scratch + channels;
  for (int64_t r0 = 0; r0 < rows; r0 += cpu::kBnRowFlush) {
    const int64_t r1 = std::min(rows, r0 + cpu::kBnRowFlush);
    std::fill_n(scratch, 2 * channels, 0.0f);
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < channels; ++c) {
        const float d = static_cast<float>(dy[r * row_stride + c]);
        acc_dy[c] += d;
        acc_dy_xmu[c] += d * (static_cast<float>(x[r * row_stride + c]) - mean[c]);
      }
    }
    for (int64_t c = 0; c < channels; ++c) {
      sum_dy[c] += acc_dy[c];
      sum_dy_xmu[c] += acc_dy_xmu[c];
    }
  }
}

template <typename T>
void run_sums(bool avx512, const T* dy, const T* x, int64_t runs, int64_t run_length,
              int64_t run_stride, MeanT<T> mean, double* sum_dy, double* sum_dy_xmu) {
  if constexpr (std::is_same_v<T, double>) {  // float64: double lanes (batch_norm_loops.inc)
    cpu::bn_loops().reduce_runs_f64(dy, x, runs, run_length, run_stride, mean, sum_dy, sum_dy_xmu);
  } else if (avx512) {
    cpu::bn_run_sums(bn_type<T>(), dy, x, runs, run_length, run_stride, mean, sum_dy, sum_dy_xmu);
  } else {
    portable_run_sums(dy, x, runs, run_length, run_stride, mean, sum_dy, sum_dy_xmu);
  }
}

template <typename T>
void rows_sums(bool avx512, const T* dy, const T* x, int64_t rows, int64_t channels,
               int64_t row_stride, const MeanT<T>* mean, float* scratch, double* sum_dy,
               double* sum_dy_xmu) {
  if constexpr (std::is_same_v<T, double>) {
    cpu::bn_loops().reduce_rows_f64(dy, x, rows, channels, row_stride, mean, sum_dy, sum_dy_xmu);
  } else if (avx512) {
    cpu::bn_rows_sums(bn_type<T>(), dy, x, rows, channels,
                      row_stride, mean, scratch, sum_dy, sum_dy_xmu);
  } else {
    portable_rows_sums(dy, x, rows, channels, row_stride, mean, scratch, sum_dy, sum_dy_xmu);
  }
}

// [N, C, S] with S contiguous per (n, c).
template <typename T>
Sums channels_outer_sums(const T* dy, const T* x, int64_t n, int64_t c, int64_t s,
                         const MeanT<T>* mean) {
  const bool avx512 = use_avx512();
  const int64_t rows_per_task = std::clamp<int64_t>(kTaskElements / std::max<int64_t>(s, 1), 1, n);
  const int64_t tasks_per_channel = (n + rows_per_task - 1) / rows_per_task;
  Sums task_sums(c * tasks_per_channel);
  at::parallel_for(0, c * tasks_per_channel, task_grain(rows_per_task * s), [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t channel = task / tasks_per_channel;
      const int64_t row0 = (task % tasks_per_channel) * rows_per_task;
      const int64_t row1 = std::min(n, row0 + rows_per_task);
      const int64_t offset = (row0 * c + channel) * s;
      run_sums(avx512, dy + offset, x + offset, row1 - row0, s, c * s, mean[channel],
               &task_sums.dy[task], &task_sums.dy_xmu[task]);
    }
  });
  Sums sums(c);
  for (const auto channel : c10::irange(c)) {
    for (const auto t : c10::irange(tasks_per_channel)) {
      sums.dy[channel] += task_sums.dy[channel * tasks_per_channel + t];
      sums.dy_xmu[channel] += task_sums.dy_xmu[channel * tasks_per_channel + t];
    }
  }
  return sums;
}

// `rows` rows of C contiguous channels.
template <typename T>
Sums channels_inner_sums(const T* dy, const T* x, int64_t rows, int64_t c, const MeanT<T>* mean) {
  const bool avx512 = use_avx512();
  const int64_t channel_block = std::min(c, kInnerChannelBlock);
  const int64_t channel_blocks = (c + channel_block - 1) / channel_block;
  const int64_t rows_per_task = std::clamp<int64_t>(kInnerTaskElements / channel_block, 1, rows);
  const int64_t row_blocks = (rows + rows_per_task - 1) / rows_per_task;
  // Task (row block rb, channel block cb) owns task_sums[rb * c + its channels].
  Sums task_sums(row_blocks * c);
  at::parallel_for(0, row_blocks * channel_blocks, task_grain(rows_per_task * channel_block),
                   [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(2 * channel_block);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t rb = task / channel_blocks;
      const int64_t c0 = (task % channel_blocks) * channel_block;
      const int64_t width = std::min(channel_block, c - c0);
      const int64_t row0 = rb * rows_per_task;
      const int64_t count = std::min(rows, row0 + rows_per_task) - row0;
      const int64_t offset = row0 * c + c0;
      rows_sums(avx512, dy + offset, x + offset, count, width, c, mean + c0, scratch.data(),
                &task_sums.dy[rb * c + c0], &task_sums.dy_xmu[rb * c + c0]);
    }
  });
  Sums sums(c);
  for (const auto rb : c10::irange(row_blocks)) {
    for (const auto channel : c10::irange(c)) {
      sums.dy[channel] += task_sums.dy[rb * c + channel];
      sums.dy_xmu[channel] += task_sums.dy_xmu[rb * c + channel];
    }
  }
  return sums;
}

// True when the channel dim is innermost and the rest is dense: `t.movedim(1, -1)` is
// contiguous (channels_last and channels_last_3d are).
bool channels_innermost(const at::Tensor& t) { return t.movedim(1, -1).is_contiguous(); }

template <typename T>
Sums channel_sums(const at::Tensor& grad_out, const at::Tensor& input, const MeanT<T>* mean) {
  const int64_t n = input.size(0);
  const int64_t c = input.size(1);
  const int64_t s = input.numel() / (n * c);
  const bool contiguous = input.is_contiguous() && grad_out.is_contiguous();
  if ((contiguous && s == 1) || (!contiguous && channels_innermost(input) &&
                                 channels_innermost(grad_out))) {
    return channels_inner_sums<T>(grad_out.const_data_ptr<T>(), input.const_data_ptr<T>(),
                                  n * s, c, mean);
  }
  if (contiguous) {
    return channels_outer_sums<T>(grad_out.const_data_ptr<T>(), input.const_data_ptr<T>(), n, c,
                                  s, mean);
  }
  const at::Tensor dy = grad_out.contiguous();
  const at::Tensor x = input.contiguous();
  return channels_outer_sums<T>(dy.const_data_ptr<T>(), x.const_data_ptr<T>(), n, c, s, mean);
}

using MaybeTensor = std::optional<at::Tensor>;

// Both entry points, after their own validation (the op's dtypes, or aten's with float64).
std::tuple<MaybeTensor, MaybeTensor, MaybeTensor, MaybeTensor> reduce_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, bool input_g, bool weight_g, bool bias_g) {
  if (!input_g && !weight_g && !bias_g) {
    return {};
  }
  const int64_t c = input.size(1);
  const bool f64 = input.scalar_type() == at::kDouble;
  const at::Tensor mean_c = mean.to(f64 ? at::kDouble : at::kFloat).contiguous();
  Sums sums(c);
  if (input.numel() > 0) {
    switch (input.scalar_type()) {  // validation admitted exactly these four
      case at::kFloat: sums = channel_sums<float>(grad_out, input, mean_c.const_data_ptr<float>()); break;
      case at::kBFloat16: sums = channel_sums<at::BFloat16>(grad_out, input, mean_c.const_data_ptr<float>()); break;
      case at::kHalf: sums = channel_sums<at::Half>(grad_out, input, mean_c.const_data_ptr<float>()); break;
      case at::kDouble: sums = channel_sums<double>(grad_out, input, mean_c.const_data_ptr<double>()); break;
      default: TORCH_INTERNAL_ASSERT(false, "unvalidated dtype ", input.scalar_type());
    }
  }

  // Assembled in double, rounded once into the output dtype. invstd is read as it was
  // given (a float invstd is exact in double).
  const at::Tensor invstd_d = invstd.to(at::kDouble).contiguous();
  const double* inv = invstd_d.const_data_ptr<double>();
  const auto options = input.options().dtype(at::kDouble);
  at::Tensor sum_dy = at::empty({c}, options);
  at::Tensor sum_dy_xmu = at::empty({c}, options);
  at::Tensor grad_weight = at::empty({c}, options);
  double* p_dy = sum_dy.mutable_data_ptr<double>();
  double* p_dy_xmu = sum_dy_xmu.mutable_data_ptr<double>();
  double* p_gw = grad_weight.mutable_data_ptr<double>();
  for (const auto channel : c10::irange(c)) {
    p_dy[channel] = sums.dy[channel];
    p_dy_xmu[channel] = sums.dy_xmu[channel];
    p_gw[channel] = sums.dy_xmu[channel] * inv[channel];
  }
  const at::ScalarType out_type =
      batch_norm_reduce_output_dtype(input.scalar_type(), mean.scalar_type());
  const auto out = [&](bool wanted, const at::Tensor& t) -> MaybeTensor {
    return wanted ? MaybeTensor(t.to(out_type)) : std::nullopt;
  };
  return {out(input_g, sum_dy), out(input_g, sum_dy_xmu), out(weight_g, grad_weight),
          out(bias_g, sum_dy)};
}

std::tuple<MaybeTensor, MaybeTensor, MaybeTensor, MaybeTensor> batch_norm_reduce_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, bool input_g,
    bool weight_g, bool bias_g) {
  check_batch_norm_reduce_backward(grad_out, input, mean, invstd, weight);
  return reduce_backward(grad_out, input, mean, invstd, input_g, weight_g, bias_g);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_reduce_cpu(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, bool input_g,
    bool weight_g, bool bias_g) {
  check_aten_batch_norm_backward_reduce(grad_out, input, mean, invstd, weight);
  auto [sum_dy, sum_dy_xmu, grad_weight, grad_bias] =
      reduce_backward(grad_out, input, mean, invstd, input_g, weight_g, bias_g);
  // aten's schema returns four Tensors: one not asked for is an undefined tensor.
  const auto defined = [](MaybeTensor& t) { return t.has_value() ? *t : at::Tensor(); };
  return {defined(sum_dy), defined(sum_dy_xmu), defined(grad_weight), defined(grad_bias)};
}

TORCH_LIBRARY_IMPL(ascend_ops, CPU, m) {
  m.impl("batch_norm_reduce_backward", &batch_norm_reduce_backward_cpu);
}

}  // namespace ascend_ops
