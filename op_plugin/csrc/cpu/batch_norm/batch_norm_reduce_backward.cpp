// CPU kernel of batch_norm_reduce_backward (SPEC §2).
//
// One pass over grad_out and input computes both sums, Σ dy and Σ dy·(x − mean)
// (directly: Σ dy·x − mean·Σ dy cancels when |mean| ≫ std), every element converted to
// double and every sum a double (as aten's CPU batch norm accumulates float in double;
// the loops are batch_norm_loops.inc's). Two layouts are read in place:
//   * channels outer (contiguous [N, C, *]): per (n, c) a run of S contiguous elements;
//     tasks are (block of rows, block of channels) holding about kTaskElements elements,
//     read in memory order, so the work spreads over channels when C is large and over
//     N x S when C is small;
//   * channels inner (channels_last, or S == 1): rows of C contiguous channels; tasks
//     are (block of rows, block of channels).
// Any other layout is copied to contiguous first. The task cut depends on the shape
// only and the task sums are added in task order, so results are bitwise identical for
// any thread count. Scratch is per task, not per element: no tensor-sized temporaries.
#include "../../validation.h"
#include "batch_norm_kernels.h"
#include "batch_norm_layout.h"

#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace ascend_ops {
namespace {

constexpr int64_t kTaskElements = 1 << 15;
constexpr int64_t kOuterChannelBlock = 64;  // at most 64 channels' lanes (16 KiB) per task
constexpr int64_t kInnerTaskElements = 1 << 16;
// Runs shorter than this (7x7 and 14x14 maps) go to the loops a channel at a time, all the
// task's rows in one call: the half-input loops flush their float block once per call,
// which per row cost as much as a 49-element run. A task's rows are then read with a stride,
// but a task is at most kTaskElements elements, cache-resident either way.
constexpr int64_t kShortRun = 256;
constexpr int64_t kInnerChannelBlock = 256;

struct Sums {
  std::vector<double> dy, dy_xmu;
  explicit Sums(int64_t n) : dy(n, 0.0), dy_xmu(n, 0.0) {}
};

// Contiguous [N, C, S]: S contiguous elements per (n, c). `item` is the element size.
// Task = (block of rows, block of channels), read in memory order: row by row, the block's
// channels' runs one after another, so each thread streams through one contiguous range
// per row (as batch_norm_stats does; runs shorter than kShortRun: channel by channel). A
// task per channel would jump C·S elements between runs of S (784 elements at
// 32x256x28x28): 32 short streams per channel, each restarting the prefetcher.
// Each channel keeps its double lanes across the task's rows, added into its task sums at
// the end.
Sums channels_outer_sums(cpu::BnElem type, const char* dy, const char* x, int64_t item,
                         int64_t n, int64_t c, int64_t s, const double* mean) {
  const auto& loops = cpu::bn_loops();
  const int64_t channel_block = std::clamp<int64_t>(kTaskElements / std::max<int64_t>(s, 1), 1,
                                                    std::min(c, kOuterChannelBlock));
  const int64_t channel_blocks = (c + channel_block - 1) / channel_block;
  const int64_t rows_per_task =
      std::clamp<int64_t>(kTaskElements / (channel_block * std::max<int64_t>(s, 1)), 1, n);
  const int64_t row_blocks = (n + rows_per_task - 1) / rows_per_task;
  constexpr int64_t kLaneValues = 2 * cpu::kBnLanes;  // Σ dy lanes, then Σ dy·(x − mean)
  Sums task_sums(row_blocks * c);  // task (rb, cb) owns [rb * c + its channels]
  at::parallel_for(0, row_blocks * channel_blocks,
                   cpu::bn_grain(rows_per_task * channel_block * s), [&](int64_t begin, int64_t end) {
    std::vector<double> lanes(channel_block * kLaneValues);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t rb = task / channel_blocks;
      const int64_t c0 = (task % channel_blocks) * channel_block;
      const int64_t width = std::min(channel_block, c - c0);
      const int64_t row0 = rb * rows_per_task;
      const int64_t row1 = std::min(n, row0 + rows_per_task);
      std::fill(lanes.begin(), lanes.end(), 0.0);
      if (s < kShortRun) {  // channel by channel, all the task's rows in one call
        for (int64_t k = 0; k < width; ++k) {
          const int64_t offset = (row0 * c + c0 + k) * s * item;
          loops.reduce_runs(type, dy + offset, x + offset, row1 - row0, s, c * s, mean[c0 + k],
                            lanes.data() + k * kLaneValues);
        }
      } else {
        for (int64_t row = row0; row < row1; ++row) {
          for (int64_t k = 0; k < width; ++k) {
            const int64_t offset = (row * c + c0 + k) * s * item;
            loops.reduce_runs(type, dy + offset, x + offset, 1, s, c * s, mean[c0 + k],
                              lanes.data() + k * kLaneValues);
          }
        }
      }
      for (int64_t k = 0; k < width; ++k) {  // lane order: fixed by the shape
        const double* channel_lanes = lanes.data() + k * kLaneValues;
        for (int64_t l = 0; l < cpu::kBnLanes; ++l) {
          task_sums.dy[rb * c + c0 + k] += channel_lanes[l];
          task_sums.dy_xmu[rb * c + c0 + k] += channel_lanes[cpu::kBnLanes + l];
        }
      }
    }
  });
  Sums sums(c);
  for (const auto rb : c10::irange(row_blocks)) {  // row-block order: fixed by the shape
    for (const auto channel : c10::irange(c)) {
      sums.dy[channel] += task_sums.dy[rb * c + channel];
      sums.dy_xmu[channel] += task_sums.dy_xmu[rb * c + channel];
    }
  }
  // Inf or NaN sums (an Inf or NaN input, a bfloat16 product past 3.4e38 in a float
  // block): the channel's sums again, every element in double.
  cpu::resum_non_finite_channels(sums.dy, sums.dy_xmu, [&](int64_t channel, double* lanes) {
    const int64_t offset = channel * s * item;
    loops.reduce_runs_double(type, dy + offset, x + offset, n, s, c * s, mean[channel], lanes);
  });
  return sums;
}

// `rows` rows of C contiguous channels.
Sums channels_inner_sums(cpu::BnElem type, const char* dy, const char* x, int64_t item,
                         int64_t rows, int64_t c, const double* mean) {
  const auto& loops = cpu::bn_loops();
  const int64_t channel_block = std::min(c, kInnerChannelBlock);
  const int64_t channel_blocks = (c + channel_block - 1) / channel_block;
  const int64_t rows_per_task = std::clamp<int64_t>(kInnerTaskElements / channel_block, 1, rows);
  const int64_t row_blocks = (rows + rows_per_task - 1) / rows_per_task;
  // Task (row block rb, channel block cb) owns task_sums[rb * c + its channels].
  Sums task_sums(row_blocks * c);
  at::parallel_for(0, row_blocks * channel_blocks, cpu::bn_grain(rows_per_task * channel_block),
                   [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t rb = task / channel_blocks;
      const int64_t c0 = (task % channel_blocks) * channel_block;
      const int64_t width = std::min(channel_block, c - c0);
      const int64_t row0 = rb * rows_per_task;
      const int64_t count = std::min(rows, row0 + rows_per_task) - row0;
      const int64_t offset = (row0 * c + c0) * item;
      loops.reduce_rows(type, dy + offset, x + offset, count, width, c, mean + c0,
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

Sums channel_sums(const at::Tensor& grad_out, const at::Tensor& input, const double* mean) {
  const int64_t n = input.size(0);
  const int64_t c = input.size(1);
  const int64_t s = input.numel() / (n * c);
  const cpu::BnElem type = cpu::bn_elem(input.scalar_type());
  const int64_t item = input.element_size();
  const auto bytes = [](const at::Tensor& t) { return static_cast<const char*>(t.const_data_ptr()); };
  const bool contiguous = input.is_contiguous() && grad_out.is_contiguous();
  if ((contiguous && s == 1) || (!contiguous && cpu::channels_innermost(input) &&
                                 cpu::channels_innermost(grad_out))) {
    return channels_inner_sums(type, bytes(grad_out), bytes(input), item, n * s, c, mean);
  }
  if (contiguous) {
    return channels_outer_sums(type, bytes(grad_out), bytes(input), item, n, c, s, mean);
  }
  const at::Tensor dy = grad_out.contiguous();
  const at::Tensor x = input.contiguous();
  return channels_outer_sums(type, bytes(dy), bytes(x), item, n, c, s, mean);
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
  // mean and invstd are read in double whatever their dtype (exact), in place.
  const std::vector<double> mean_d = cpu::doubles(mean);
  Sums sums(c);
  if (input.numel() > 0) {
    sums = channel_sums(grad_out, input, mean_d.data());
  }

  // Assembled in double, rounded once into the output dtype.
  const std::vector<double> inv = cpu::doubles(invstd);
  std::vector<double> grad_weight(c);
  for (const auto channel : c10::irange(c)) {
    grad_weight[channel] = sums.dy_xmu[channel] * inv[channel];
  }
  const at::ScalarType out_type =
      batch_norm_reduce_output_dtype(input.scalar_type(), mean.scalar_type());
  const auto out = [&](bool wanted, const std::vector<double>& values) -> MaybeTensor {
    return wanted ? MaybeTensor(cpu::tensor_of(values, out_type, input.options()))
                  : std::nullopt;
  };
  return {out(input_g, sums.dy), out(input_g, sums.dy_xmu), out(weight_g, grad_weight),
          out(bias_g, sums.dy)};
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
