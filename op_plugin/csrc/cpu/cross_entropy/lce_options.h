// The CPU kernels of linear_cross_entropy with its loss options (SPEC §7: head bias, class
// weights, label smoothing, logit scale, soft-cap, z-loss, token accuracy), never holding
// [BT, V]. The option math itself is one stage, logit_options.h; these functions feed it
// rows of fp32 logits from the GEMM layer and run the gradient GEMMs on what it returns:
//
//   forward, per row chunk:  raw = x_c @ W.T (fp32, lce_chunk_logits)
//                            y = options(raw) in place; row statistics      lce_options_chunk_statistics
//                            the caller makes them global (collectives)
//                            G_c = dL/draw, rounded to the cache's dtype     lce_options_write_grad_rows
//   backward from the cache: lce_cached_backward (lce_grad_cache.h) + lce_cached_bias_grad
//   backward, recomputing:   per vocabulary chunk c: raw_c = x @ W_c.T, y, dL/draw (the stage),
//                            dx += G_c @ W_c, dW[c] = G_c.T @ x, db[c] = column sums   lce_options_backward
//
// bfloat16 and float16 on the GEMM layer's engines (float16: portable), float32 on ATen's
// fp32 GEMM. Internal to python/ascend_ops/training/lce/route_cpu_options.py (the arguments
// checked by lce/checks.py): the operators that mirror CANN's ops (SPEC §1, §3) keep their
// contracts.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace ascend_ops {
namespace cpu {

// One row chunk of the forward: the chunk's raw logits into logits_buffer[:rows, :V], the
// options applied there in place (the buffer then holds y for lce_options_write_grad_rows),
// and per row, over this shard's V columns: (max_j y_j, sum_j exp(y_j - max),
// y_target - max (0 where columns[i] < 0), sum_j w_j (y_j - max) (0 unless
// want_weighted_sum), the first argmax column (int64, -1 for V = 0; 0 unless want_argmax)).
// `columns` [rows] int64: each row's target column in this shard, or -1.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> lce_options_chunk_statistics(
    const at::Tensor& input_chunk, const at::Tensor& weight, const at::Tensor& columns,
    at::Tensor& logits_buffer, const std::optional<at::Tensor>& bias, double scale, double softcap,
    const std::optional<at::Tensor>& class_weight, bool want_weighted_sum, bool want_argmax);

// G for the chunk's rows into grad_rows [rows, >= V] (contiguous rows, input's dtype), from
// the y that lce_options_chunk_statistics left in logits_buffer and each row's global max,
// global exp sum and coefficients alpha, beta, gamma (float32 [rows]); the rows' padding
// columns past V are set to 0. logits_buffer is overwritten with the fp32 gradient.
void lce_options_write_grad_rows(at::Tensor& logits_buffer, const at::Tensor& global_max,
                                 const at::Tensor& global_sum, const at::Tensor& columns,
                                 const at::Tensor& alpha, const at::Tensor& beta,
                                 const at::Tensor& gamma, double scale, double softcap,
                                 const std::optional<at::Tensor>& class_weight,
                                 at::Tensor& grad_rows);

// The bias gradient from a cached G [BT, >= V]: sum_i row_scale[i] * G[i, j] for j < vocab,
// float32 [vocab] (row_scale None: every scale 1). Rows are summed in order: the same
// result for any thread count.
at::Tensor lce_cached_bias_grad(const at::Tensor& grad_cache, const std::optional<at::Tensor>& row_scale,
                                int64_t vocab);

// (input_grad [BT, H], weight_grad [V, H], bias_grad float32 [V]) recomputing the logits
// one vocabulary chunk at a time; alpha, beta, gamma float32 [BT] include the upstream
// gradient. A gradient not wanted is an undefined tensor (None in Python). `chunk_columns`
// (tests) sets the vocabulary chunk; by default it holds at most 32 MiB of fp32 logits.
std::tuple<at::Tensor, at::Tensor, at::Tensor> lce_options_backward(
    const at::Tensor& input, const at::Tensor& weight, const at::Tensor& columns,
    const at::Tensor& global_max, const at::Tensor& global_sum, const at::Tensor& alpha,
    const at::Tensor& beta, const at::Tensor& gamma, const std::optional<at::Tensor>& bias,
    double scale, double softcap, const std::optional<at::Tensor>& class_weight,
    bool want_input_grad, bool want_weight_grad, bool want_bias_grad,
    std::optional<int64_t> chunk_columns);

}  // namespace cpu
}  // namespace ascend_ops
