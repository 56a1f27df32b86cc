// The one validation of each operator (SPEC §1, §2, §3), shared by every implementation:
// the CPU and NPU kernels call it in C++, the reference and the fake kernels call it
// from Python through ascend_ops._C. A failed check throws c10::TypeError (wrong dtype)
// or c10::ValueError (anything else), which Python sees as TypeError / ValueError, with
// a message naming the argument, what was expected and what was given. Nothing is
// written before these checks pass.
//
// Sizes are read as SymInts so the same checks run on the symbolic shapes of
// torch.compile's fake tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace ascend_ops {

// `check_values` also reads masked_target and target_mask (impossible on fake tensors)
// to reject an unmasked row whose target lies outside [0, V).
void check_fused_linear_cross_entropy_loss_grad(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    const at::Tensor& target_mask, const at::Tensor& masked_target, double label_smoothing,
    const std::optional<at::Tensor>& logits_max,
    const std::optional<at::Tensor>& sum_exp_logits,
    const std::optional<at::Tensor>& softmax, bool check_values);

// The CPU kernels' scratch budget, when given, must be a positive number of bytes.
void check_scratch_bytes(const char* op, std::optional<int64_t> scratch_bytes);

void check_batch_norm_reduce_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight);

// SPEC §3. Requires 0 <= vocab_start_index <= vocab_end_index <= vocab_start_index + V
// (end exclusive), so every target inside the range has a column in this shard.
void check_fused_linear_online_max_sum(
    const at::Tensor& input, const at::Tensor& weight, const at::Tensor& target,
    int64_t vocab_start_index, int64_t vocab_end_index);

// SPEC §3: the three global row statistics, and `input`/`weight` must be None (as on the
// NPU, which accepts nothing else there yet).
void check_fused_cross_entropy_loss_with_max_sum(
    const at::Tensor& logits_max, const at::Tensor& sum_exp_logits,
    const at::Tensor& predicted_logits, double label_smoothing,
    const std::optional<at::Tensor>& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& vocab_parallel_logits);

// The one rule for the dtype of batch_norm_reduce_backward's four sums, used by the CPU
// and NPU kernels and (through ascend_ops._C) by Python: float64 for a float64 input
// (aten's CPU registration only), else float16 when input and mean are both float16,
// else float32 (torch_npu's rule; a bfloat16 input gives float32 sums).
at::ScalarType batch_norm_reduce_output_dtype(at::ScalarType input, at::ScalarType mean);

// aten::batch_norm_backward_reduce on CPU (SPEC §2): the rules of
// check_batch_norm_reduce_backward with float64 admitted and no upper limit on the dims.
void check_aten_batch_norm_backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight);

// The rest of the sync-BN family, as registered for aten's ops on CPU (SPEC §2b). Data
// tensors are float32, float64, float16 or bfloat16 with at least 2 dims [N, C, *] and
// C >= 1; per-channel tensors are 1-D of length C in any of those dtypes (mixed as CUDA
// accepts them: a half input with float32 statistics).
void check_batch_norm_stats(const at::Tensor& input, double eps);
void check_batch_norm_gather_stats(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    double eps, const at::Tensor& counts);
void check_batch_norm_elemt(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                            const at::Tensor& invstd);
void check_batch_norm_backward_elemt(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, const at::Tensor& sum_dy,
    const at::Tensor& sum_dy_xmu, const at::Tensor& count);

}  // namespace ascend_ops
