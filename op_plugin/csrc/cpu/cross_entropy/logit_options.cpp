#include "logit_options.h"

#include "../gemm/bf16_matrix.h"

#include <cmath>
#include <limits>

namespace ascend_ops {
namespace cpu {

void apply_logit_options(const LogitOptions& options, int64_t col0, int64_t cols, float* row) {
  const float* bias = options.bias != nullptr ? options.bias + col0 : nullptr;
  const float scale = options.scale;
  if (bias != nullptr) {
    for (int64_t j = 0; j < cols; ++j) {
      row[j] = scale * (row[j] + bias[j]);
    }
  } else if (scale != 1.0f) {
    for (int64_t j = 0; j < cols; ++j) {
      row[j] *= scale;
    }
  }
  if (options.softcap > 0.0f) {
    const float cap = options.softcap;
    const float inv_cap = 1.0f / cap;
    for (int64_t j = 0; j < cols; ++j) {
      row[j] = cap * std::tanh(row[j] * inv_cap);
    }
  }
}

RowStatistics logit_row_statistics(const LogitOptions& options, int64_t col0, int64_t cols,
                                   const float* y, bool want_weighted_sum, bool want_argmax) {
  RowStatistics s{-std::numeric_limits<float>::infinity(), 0.0, 0.0, -1};
  if (cols <= 0) {
    return s;
  }
  s.max = logits_row_max(y, cols);  // NaN wins, as torch.amax
  s.sum_exp = logits_exp_sum(y, cols, s.max);
  if (want_weighted_sum) {
    // Relative to the row's maximum: the terms stay small, so the float sum of another
    // rank's part added later loses nothing to cancellation (SPEC §7).
    double sum = 0.0;
    const float* w = options.class_weight != nullptr ? options.class_weight + col0 : nullptr;
    for (int64_t j = 0; j < cols; ++j) {
      const double shifted = static_cast<double>(y[j]) - s.max;
      sum += w != nullptr ? w[j] * shifted : shifted;
    }
    s.weighted_sum = sum;
  }
  if (want_argmax) {
    for (int64_t j = 0; j < cols; ++j) {
      if (y[j] == s.max) {  // the first, as torch.argmax; none when max is NaN
        s.argmax = j;
        break;
      }
    }
  }
  return s;
}

void logit_gradient_row(const LogitOptions& options, const RowGradient& g, int64_t col0,
                        int64_t cols, float* row) {
  const float* w = options.class_weight != nullptr ? options.class_weight + col0 : nullptr;
  const bool has_target = g.target >= 0 && g.target < cols;
  const float target_y = has_target ? row[g.target] : 0.0f;
  const float scale = options.scale;
  const float inv_cap = options.softcap > 0.0f ? 1.0f / options.softcap : 0.0f;
  // dy/draw: scale, times tanh's derivative 1 - tanh^2 = 1 - (y / cap)^2 under the softcap
  // (inv_cap = 0 without it).
  const auto slope = [=](float y) {
    const float t = y * inv_cap;
    return scale * (1.0f - t * t);
  };
  for (int64_t j = 0; j < cols; ++j) {
    const float y = row[j];
    const float d = g.alpha * (std::exp(y - g.max) * g.inv_sum) - g.gamma * (w != nullptr ? w[j] : 1.0f);
    row[j] = slope(y) * d;
  }
  if (has_target) {
    row[g.target] -= slope(target_y) * g.beta;
  }
}

}  // namespace cpu
}  // namespace ascend_ops
