// The loss options of linear_cross_entropy (SPEC §7) as one per-element and per-row stage,
// shared by its CPU kernels (lce_options.h): whatever produced a row of fp32 logits (a
// GEMM into a chunk buffer today, a GEMM epilogue later), these functions turn it into
// the row's statistics in the forward and into its logits gradient in the backward.
//
//   raw   = input @ weight.T                      the GEMM's fp32 output, [cols] of a row
//   y_j   = cap * tanh(scale * (raw_j + b_j) / cap)   (softcap off: scale * (raw_j + b_j))
//   p_j   = exp(y_j - M) / S                       M, S the row's global max and exp sum
//   dL/dy_j   = alpha * p_j - beta * [j == t] - gamma * w_j     (w_j = 1 without weights)
//   dL/draw_j = scale * (1 - (y_j / cap)^2) * dL/dy_j           (softcap off: scale * dL/dy_j)
//
// alpha, beta, gamma are the row's coefficients (training/lce/option_math.py derives them from
// label_smoothing, the class weights, lse_square_scale and the reduction, SPEC §7); the
// stage does not know the reduction, the ranks or the upstream gradient.
#pragma once

#include <cstdint>

namespace ascend_ops {
namespace cpu {

// The element-wise options of one call; pointers index this shard's columns [0, V).
struct LogitOptions {
  const float* bias = nullptr;          // [V] fp32, or null
  float scale = 1.0f;                   // logit_scale
  float softcap = 0.0f;                 // the cap (> 0), or 0 for none
  const float* class_weight = nullptr;  // [V] fp32, or null (every weight 1)
};

// A row's local statistics over its columns (this shard's, or a chunk of them).
struct RowStatistics {
  float max;            // max_j y_j (NaN when a y_j is NaN; -inf for no columns)
  double sum_exp;       // sum_j exp(y_j - max)
  double weighted_sum;  // sum_j w_j (y_j - max), when asked for, else 0
  int64_t argmax;       // the first j with y_j == max (-1 for no columns), when asked for
};

// A row's coefficients for the gradient (see the top).
struct RowGradient {
  float max;
  float inv_sum;  // 1 / S
  float alpha;
  float beta;
  float gamma;
  int64_t target;  // the target's column among the row's columns, or -1
};

// y = the options applied to raw, in place: row[0, cols) holds columns [col0, col0 + cols).
void apply_logit_options(const LogitOptions& options, int64_t col0, int64_t cols, float* row);

// The statistics of a row of y [cols] (columns [col0, col0 + cols)).
RowStatistics logit_row_statistics(const LogitOptions& options, int64_t col0, int64_t cols,
                                   const float* y, bool want_weighted_sum, bool want_argmax);

// dL/draw for a row of y, in place and in fp32: row[0, cols) holds columns [col0, col0 +
// cols); `gradient.target` counts from col0.
void logit_gradient_row(const LogitOptions& options, const RowGradient& gradient, int64_t col0,
                        int64_t cols, float* row);

}  // namespace cpu
}  // namespace ascend_ops
