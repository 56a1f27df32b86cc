// How the batch-norm CPU kernels read [N, C, *] tensors in place, and the pieces they
// share (SPEC §2, docs/cpu_kernels.md).
#pragma once

#include "batch_norm_loops.h"

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/TensorIterator.h>  // at::internal::GRAIN_SIZE

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

namespace ascend_ops {
namespace cpu {

// The two layouts read in place (batch_norm_loops.h):
//   kRuns: contiguous [N, C, S] — N runs of S elements per channel;
//   kRows: channels innermost (channels_last, channels_last_3d, or [N, C]) — N·S rows of C.
enum class BnLayout { kRuns, kRows };

struct BnShape {
  int64_t n, c, s;  // input = [n, c, s...], s = product of the spatial sizes
  BnLayout layout;
  int64_t rows() const { return n * s; }
};

// True when the channel dim is innermost and the rest is dense: `t.movedim(1, -1)` is
// contiguous (channels_last and channels_last_3d are).
inline bool channels_innermost(const at::Tensor& t) { return t.movedim(1, -1).is_contiguous(); }

// The layout `t` is read in, or nullopt when it must be copied (to contiguous) first.
inline std::optional<BnLayout> readable_layout(const at::Tensor& t) {
  const int64_t s = t.size(0) * t.size(1) == 0 ? 1 : t.numel() / (t.size(0) * t.size(1));
  if (t.is_contiguous()) {
    return s == 1 ? BnLayout::kRows : BnLayout::kRuns;
  }
  if (channels_innermost(t)) {
    return BnLayout::kRows;
  }
  return std::nullopt;
}

// `t` as the kernels read it: itself when readable in place, else a contiguous copy.
inline at::Tensor readable(const at::Tensor& t) {
  return readable_layout(t).has_value() ? t : t.contiguous();
}

// Shape and layout of a readable tensor (readable_layout(t) has a value).
inline BnShape bn_shape(const at::Tensor& t) {
  const int64_t n = t.size(0), c = t.size(1);
  const int64_t s = n * c == 0 ? 1 : t.numel() / (n * c);
  const std::optional<BnLayout> layout = readable_layout(t);
  TORCH_INTERNAL_ASSERT(layout.has_value(), "bn_shape of an unreadable layout");
  return {n, c, std::max<int64_t>(s, 1), *layout};
}

// `like` (the shape of `reference`) in reference's layout, so one BnShape reads both:
// itself when the strides agree, else a copy.
inline at::Tensor same_layout(const at::Tensor& like, const at::Tensor& reference) {
  return like.strides() == reference.strides() ? like : at::empty_like(reference).copy_(like);
}

inline BnElem bn_elem(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return BnElem::kFloat32;
    case at::kDouble: return BnElem::kFloat64;
    case at::kHalf: return BnElem::kFloat16;
    case at::kBFloat16: return BnElem::kBFloat16;
    default: TORCH_INTERNAL_ASSERT(false, "unvalidated batch-norm dtype ", t);
  }
}

// The loops' compute type for an element type: float64 for float64, else float32.
inline at::ScalarType bn_compute_type(at::ScalarType t) {
  return t == at::kDouble ? at::kDouble : at::kFloat;
}

// Work items per parallel chunk so a chunk holds about ATen's grain (32K elements):
// small inputs stay on the calling thread.
inline int64_t bn_grain(int64_t elements_per_item) {
  return std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(1, elements_per_item));
}

// The values of a 1-D or 2-D tensor in double, row-major, read in place through its
// strides. The per-channel and per-rank operands are small: a tensor op for each
// (.to(kDouble), .contiguous()) cost more than this loop, ~5 us a call. Every batch-norm
// and count dtype converts exactly (integers above 2^53 round, as .to(kDouble) does).
inline std::vector<double> doubles(const at::Tensor& t) {
  TORCH_INTERNAL_ASSERT(t.dim() == 1 || t.dim() == 2, "doubles of a ", t.dim(), "-D tensor");
  const bool matrix = t.dim() == 2;
  const int64_t rows = matrix ? t.size(0) : 1, cols = t.size(matrix ? 1 : 0);
  const int64_t row_stride = matrix ? t.stride(0) : 0, col_stride = t.stride(matrix ? 1 : 0);
  std::vector<double> values(rows * cols);
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, t.scalar_type(), "doubles", [&] {
    const scalar_t* p = t.const_data_ptr<scalar_t>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        values[r * cols + c] = static_cast<double>(p[r * row_stride + c * col_stride]);
      }
    }
  });
  return values;
}

// Per channel invstd · weight in double (invstd alone without a weight): the scale of
// elemt and backward elemt.
inline std::vector<double> invstd_times_weight(const at::Tensor& invstd,
                                               const std::optional<at::Tensor>& weight) {
  std::vector<double> scale = doubles(invstd);
  if (weight.has_value()) {
    const std::vector<double> w = doubles(*weight);
    for (size_t i = 0; i < scale.size(); ++i) {
      scale[i] *= w[i];
    }
  }
  return scale;
}

// A new 1-D tensor of `dtype` (device and layout from `options`) holding `values`, each
// converted once, as .to(dtype) of a double tensor converts.
inline at::Tensor tensor_of(const std::vector<double>& values, at::ScalarType dtype,
                            const at::TensorOptions& options) {
  at::Tensor t = at::empty({static_cast<int64_t>(values.size())}, options.dtype(dtype));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "tensor_of", [&] {
    scalar_t* p = t.mutable_data_ptr<scalar_t>();
    for (size_t i = 0; i < values.size(); ++i) {
      p[i] = static_cast<scalar_t>(values[i]);
    }
  });
  return t;
}

// The channels whose two sums (first[c], second[c]) came out Inf or NaN, summed again
// with every element in double: `sum_in_double(channel, lanes)` adds the channel's terms
// to 2·kBnLanes zeroed lanes with one of BnLoops' *_double loops, and the lanes, flushed
// in lane order, replace both sums. Why: the portable and AVX2 builds sum half inputs in
// float blocks, exact rearrangements of the double sums for finite terms only
// (batch_norm_loops.h); such a sum comes out Inf or NaN, never a wrong finite value, so
// finite sums never come here. Run on every build and dtype: elsewhere the re-sum only
// reorders a double sum, and the results of such a channel stay the same on every build.
template <typename SumInDouble>
void resum_non_finite_channels(std::vector<double>& first, std::vector<double>& second,
                               SumInDouble sum_in_double) {
  const int64_t c = static_cast<int64_t>(first.size());
  for (int64_t channel = 0; channel < c; ++channel) {
    if (std::isfinite(first[channel]) && std::isfinite(second[channel])) {
      continue;
    }
    double lanes[2 * kBnLanes] = {};
    sum_in_double(channel, lanes);
    first[channel] = second[channel] = 0.0;
    for (int64_t l = 0; l < kBnLanes; ++l) {
      first[channel] += lanes[l];
      second[channel] += lanes[kBnLanes + l];
    }
  }
}

// Per-channel values in the rows loops' compute type (float, or double for float64 input),
// rounded once from double.
class ComputeValues {
 public:
  ComputeValues(std::vector<double> values, at::ScalarType compute)
      : in_double_(compute == at::kDouble), doubles_(std::move(values)) {
    if (!in_double_) {
      floats_.assign(doubles_.begin(), doubles_.end());
    }
  }
  const void* data() const {
    return in_double_ ? static_cast<const void*>(doubles_.data()) : floats_.data();
  }

 private:
  bool in_double_;
  std::vector<double> doubles_;
  std::vector<float> floats_;
};

}  // namespace cpu
}  // namespace ascend_ops
