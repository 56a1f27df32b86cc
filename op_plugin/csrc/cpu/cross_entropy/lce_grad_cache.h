// The CPU side of linear_cross_entropy's memory-saving mode with a cached logits gradient
// (docs/training.md, "The logits-gradient cache"): the forward forms G, the bf16 logits
// gradient, row chunk by row chunk while each chunk's fp32 logits are at hand, so the
// backward needs no logits GEMM. Three GEMMs per step instead of four:
//
//   forward, per row chunk:  logits = x_c @ W.T (fp32)      lce_chunk_statistics
//                            row statistics; the caller makes them global
//                            G_c = bf16((P - onehot) * s)     lce_write_grad_rows
//                            (one shard: both in lce_chunk_statistics, row by row)
//   backward:                input_grad  = bf16(G' @ W)      lce_cached_backward
//                            weight_grad = bf16(G'.T @ x)
//
// with G' = G when every upstream row scale is 1, else bf16(G * scale). G, P and the
// products are those of fused_linear_cross_entropy_loss_grad's memory-saving mode (SPEC §1)
// on the same engine; only the order of the fp32 sums differs.
//
// Internal to the training API (python/ascend_ops/training/lce/route_plain.py; lce/checks.py
// checks the arguments); bfloat16 only, on whichever engine the GEMM layer runs it
// (lce_cache_engine).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <tuple>

namespace ascend_ops {
namespace cpu {

// The GEMM engines the cached path would run `dtype` on, as "fp32_out=E1,rounded=E2", or
// "" when it does not run (float16).
std::string lce_cache_engine(at::ScalarType dtype);

// logits [rows, V] (fp32, contiguous rows) = input_chunk @ weight.T on the GEMM layer's
// fp32-out engine for input's dtype (bfloat16, float16: portable), or ATen's fp32 GEMM for
// float32 (the options' path, lce_options.h).
void lce_chunk_logits(const at::Tensor& input_chunk, const at::Tensor& weight, at::Tensor& logits);

// One row chunk of the forward: logits = input_chunk @ weight.T in fp32 into
// logits_buffer[:rows, :V], then per row its maximum m and the sum of exp(logits - m).
// `columns` [rows] int64 holds each row's target column in this shard, or -1. Returns
// (logits_max, sum_exp_logits, predicted_logits) float32 [rows], as
// fused_linear_online_max_sum defines them (predicted relative to the local maximum).
// With `keep_exps` the buffer is left holding exp(logits - m) instead of the logits. With
// `grad_rows` [rows, >= V] and `row_scale` [rows] too (one shard, where these statistics are
// the global ones), each row's G is written as soon as its exps are summed, while they are
// in cache: lce_write_grad_rows' G and padding on the returned statistics, the same bits
// (the same product of the same values) with no second exp and no second pass.
std::tuple<at::Tensor, at::Tensor, at::Tensor> lce_chunk_statistics(
    const at::Tensor& input_chunk, const at::Tensor& weight, const at::Tensor& columns,
    at::Tensor& logits_buffer, bool keep_exps = false,
    const std::optional<at::Tensor>& row_scale = std::nullopt,
    const std::optional<at::Tensor>& grad_rows = std::nullopt);

// G for the chunk's rows, into grad_rows [rows, >= V] (bf16, contiguous rows), from the
// logits lce_chunk_statistics left in logits_buffer and the global statistics:
//   G[i, j] = bf16((exp(logits[i, j] - global_max[i]) / global_sum[i]
//                   - (j == columns[i])) * row_scale[i])
// the FLCE kernel's memory-saving formula (SPEC §1), row by row; grad_rows' columns past V
// (the cache's row padding) are set to 0, so oneDNN may read the cache in place.
void lce_write_grad_rows(const at::Tensor& logits_buffer, const at::Tensor& global_max,
                         const at::Tensor& global_sum, const at::Tensor& columns,
                         const at::Tensor& row_scale, at::Tensor& grad_rows);

// (input_grad [BT, H], weight_grad [V, H]) in input's dtype from the cached G [BT, >= V]
// (its first V columns), scaled per row by `row_scale` [BT] float32 when given. A
// gradient not asked for is not computed (an undefined tensor: None in Python).
// weight_grad goes in the block kept for the logits chunk and it from one step to the next
// where it needs at most `keep_weight_grad_at_most` bytes and the block is free
// (kept_scratch.h), else in memory of its own.
std::tuple<at::Tensor, at::Tensor> lce_cached_backward(const at::Tensor& grad_cache,
                                                       const std::optional<at::Tensor>& row_scale,
                                                       const at::Tensor& input,
                                                       const at::Tensor& weight,
                                                       bool want_input_grad, bool want_weight_grad,
                                                       int64_t keep_weight_grad_at_most = 0);

// On `portable` with every row scale 1 and both gradients wanted, input_grad's fp32 sums
// [BT, H] and its widened K blocks of G and W live in weight_grad's storage (V x H bf16)
// before weight_grad is computed: the K depth of those blocks, or 0 where the storage
// cannot hold the sums and blocks at least 256 deep (then input_grad goes in row
// and K blocks of scratch, as gemm_rounded does).
int64_t input_grad_room_depth(int64_t bt, int64_t h, int64_t vocab);

}  // namespace cpu
}  // namespace ascend_ops
