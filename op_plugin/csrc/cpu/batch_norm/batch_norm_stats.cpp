// CPU kernel of aten::batch_norm_stats (SPEC §2b): per-channel mean and invstd of
// input [N, C, *] in one pass.
//
// Shifted sums: with K[c] the channel's first element, one pass adds Σ (x − K) and
// Σ (x − K)², every element converted to double and every sum a double (as aten's CPU
// batch norm accumulates float in double), then mean = K + Σ(x − K)/n and
// var = Σ(x − K)²/n − (Σ(x − K)/n)². K lies in the data, so |mean − K| is a few std and
// nothing cancels even when |mean| ≫ std (x = 1e4 + N(0, 1): the sums are O(n), not
// O(n·1e8)); only mean and invstd are rounded, once, to float32.
//
// Tasks and their order depend on the shape only (as in batch_norm_reduce_backward.cpp),
// so the result is bitwise the same for any thread count.
#include "../../validation.h"
#include "batch_norm_kernels.h"
#include "batch_norm_layout.h"

#include <ATen/Parallel.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/util/irange.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ascend_ops {
namespace {

using cpu::BnShape;

constexpr int64_t kTaskElements = 1 << 15;
constexpr int64_t kRowsChannelBlock = 256;
constexpr int64_t kRowsTaskElements = 1 << 16;

struct ShiftedSums {
  std::vector<double> sum, sum_sq;
  explicit ShiftedSums(int64_t n) : sum(n, 0.0), sum_sq(n, 0.0) {}
};

// The per-channel sums of `task` ([row block][channel]), added in row-block order: the
// order depends on the shape only, so the result is the same for any thread count.
ShiftedSums sum_row_blocks(const ShiftedSums& task, int64_t row_blocks, int64_t c) {
  ShiftedSums sums(c);
  for (const auto rb : c10::irange(row_blocks)) {
    for (const auto channel : c10::irange(c)) {
      sums.sum[channel] += task.sum[rb * c + channel];
      sums.sum_sq[channel] += task.sum_sq[rb * c + channel];
    }
  }
  return sums;
}

// Runs layout: task = (block of rows, block of channels), read in memory order — row by
// row, the block's channels' runs one after another — so the prefetcher sees one stream
// (a channel at a time would jump C·S elements between runs of S: 2x slower at
// 32x256x28x28, 2.1 vs 1.1 ms on one thread). Each channel keeps its double lanes across
// the task's rows, added into its sums at the end of the task.
ShiftedSums runs_sums(const at::Tensor& x, const BnShape& shape, const double* shift) {
  const auto& loops = cpu::bn_loops();
  const cpu::BnElem type = cpu::bn_elem(x.scalar_type());
  const auto* base = static_cast<const char*>(x.const_data_ptr());
  const int64_t item = x.element_size();
  const int64_t n = shape.n, c = shape.c, s = shape.s;
  const int64_t channel_block = std::clamp<int64_t>(kTaskElements / s, 1, std::min(c, kRowsChannelBlock));
  const int64_t channel_blocks = (c + channel_block - 1) / channel_block;
  const int64_t rows_per_task = std::clamp<int64_t>(kTaskElements / (channel_block * s), 1, n);
  const int64_t row_blocks = (n + rows_per_task - 1) / rows_per_task;
  constexpr int64_t kLaneValues = 2 * cpu::kBnLanes;  // sums, then sums of squares
  ShiftedSums task(row_blocks * c);  // task (rb, cb) owns [rb * c + its channels]
  at::parallel_for(0, row_blocks * channel_blocks, cpu::bn_grain(rows_per_task * channel_block * s),
                   [&](int64_t begin, int64_t end) {
    std::vector<double> lanes(channel_block * kLaneValues);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t rb = t / channel_blocks;
      const int64_t c0 = (t % channel_blocks) * channel_block;
      const int64_t width = std::min(channel_block, c - c0);
      const int64_t row0 = rb * rows_per_task;
      const int64_t row1 = std::min(n, row0 + rows_per_task);
      std::fill(lanes.begin(), lanes.end(), 0.0);
      for (int64_t row = row0; row < row1; ++row) {
        for (int64_t k = 0; k < width; ++k) {
          loops.stats_lanes(type, base + (row * c + c0 + k) * s * item, s, shift[c0 + k],
                            lanes.data() + k * kLaneValues);
        }
      }
      for (int64_t k = 0; k < width; ++k) {  // lane order: the same for any thread count
        const double* channel_lanes = lanes.data() + k * kLaneValues;
        for (int64_t l = 0; l < cpu::kBnLanes; ++l) {
          task.sum[rb * c + c0 + k] += channel_lanes[l];
          task.sum_sq[rb * c + c0 + k] += channel_lanes[cpu::kBnLanes + l];
        }
      }
    }
  });
  ShiftedSums sums = sum_row_blocks(task, row_blocks, c);
  // Inf or NaN sums (an Inf or NaN input, a bfloat16 square past 3.4e38 in a float
  // block): the channel's sums again, every element in double.
  cpu::resum_non_finite_channels(sums.sum, sums.sum_sq, [&](int64_t channel, double* lanes) {
    for (int64_t row = 0; row < n; ++row) {
      loops.stats_lanes_double(type, base + (row * c + channel) * s * item, s, shift[channel],
                               lanes);
    }
  });
  return sums;
}

// Rows layout: task = (block of rows, block of channels).
ShiftedSums rows_sums(const at::Tensor& x, const BnShape& shape, const double* shift) {
  const auto& loops = cpu::bn_loops();
  const cpu::BnElem type = cpu::bn_elem(x.scalar_type());
  const auto* base = static_cast<const char*>(x.const_data_ptr());
  const int64_t item = x.element_size();
  const int64_t rows = shape.rows(), c = shape.c;
  const int64_t channel_block = std::min(c, kRowsChannelBlock);
  const int64_t channel_blocks = (c + channel_block - 1) / channel_block;
  const int64_t rows_per_task = std::clamp<int64_t>(kRowsTaskElements / channel_block, 1, rows);
  const int64_t row_blocks = (rows + rows_per_task - 1) / rows_per_task;
  ShiftedSums task(row_blocks * c);  // task (rb, cb) owns [rb * c + its channels]
  at::parallel_for(0, row_blocks * channel_blocks, cpu::bn_grain(rows_per_task * channel_block),
                   [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t rb = t / channel_blocks;
      const int64_t c0 = (t % channel_blocks) * channel_block;
      const int64_t width = std::min(channel_block, c - c0);
      const int64_t row0 = rb * rows_per_task;
      const int64_t count = std::min(rows, row0 + rows_per_task) - row0;
      loops.stats_rows(type, base + (row0 * c + c0) * item, count, width, c, shift + c0,
                       &task.sum[rb * c + c0], &task.sum_sq[rb * c + c0]);
    }
  });
  return sum_row_blocks(task, row_blocks, c);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> batch_norm_stats_float64_cpu(const at::Tensor& input_arg,
                                                                 double eps) {
  check_batch_norm_stats(input_arg, eps);
  const int64_t c = input_arg.size(1);
  const auto options = input_arg.options().dtype(at::kDouble);
  if (input_arg.numel() == 0) {
    // No values: mean 0 and an undefined (NaN) invstd, as CUDA's kernel gives.
    return {at::zeros({c}, options), at::full({c}, NAN, options)};
  }
  const at::Tensor x = cpu::readable(input_arg);
  const BnShape shape = cpu::bn_shape(x);
  // K[c]: the channel's first element (n = 0, s = 0), read in place: x.select(0, 0) and
  // on down to [C] is a view whose stride is x's channel stride.
  std::vector<double> shift64 = cpu::doubles(x.as_strided({c}, {x.stride(1)}));  // exact
  // A non-finite first element would make every shifted value NaN (inf - inf): such a
  // channel is summed unshifted, and gives torch's mean (an inf stays inf, NaN stays NaN).
  for (double& k : shift64) {
    k = std::isfinite(k) ? k : 0.0;
  }
  const ShiftedSums sums = shape.layout == cpu::BnLayout::kRuns
                               ? runs_sums(x, shape, shift64.data())
                               : rows_sums(x, shape, shift64.data());
  at::Tensor mean64 = at::empty({c}, options);
  at::Tensor invstd64 = at::empty({c}, options);
  const double count = static_cast<double>(shape.n * shape.s);
  const double* k = shift64.data();
  double* mean = mean64.mutable_data_ptr<double>();
  double* invstd = invstd64.mutable_data_ptr<double>();
  for (const auto channel : c10::irange(c)) {
    const double shifted_mean = sums.sum[channel] / count;
    // Clamp rounding's small negatives to 0, but keep NaN (std::max(0.0, NaN) is 0): a
    // channel holding NaN must get a NaN invstd, as torch's, not a healthy-looking one.
    const double raw_var = sums.sum_sq[channel] / count - shifted_mean * shifted_mean;
    const double var = raw_var < 0.0 ? 0.0 : raw_var;
    mean[channel] = k[channel] + shifted_mean;
    invstd[channel] = 1.0 / std::sqrt(var + eps);
  }
  return {mean64, invstd64};
}

std::tuple<at::Tensor, at::Tensor> batch_norm_stats_cpu(const at::Tensor& input, double eps) {
  const auto [mean, invstd] = batch_norm_stats_float64_cpu(input, eps);
  const at::ScalarType compute = cpu::bn_compute_type(input.scalar_type());
  return {mean.to(compute), invstd.to(compute)};  // rounded once
}

}  // namespace ascend_ops
