#include "validation.h"

#include "target_mask.h"

#include <c10/util/Exception.h>

#include <string>

namespace ascend_ops {
namespace {

constexpr const char* kFlce = "fused_linear_cross_entropy_loss_grad";
constexpr const char* kBn = "batch_norm_reduce_backward";
constexpr const char* kOnline = "fused_linear_online_max_sum";
constexpr const char* kLoss = "fused_cross_entropy_loss_with_max_sum";

// The spelling Python users know: torch.bfloat16, not BFloat16.
std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kByte: return "torch.uint8";
    case at::kChar: return "torch.int8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kBool: return "torch.bool";
    default: return std::string("torch.") + c10::toString(t);
  }
}

bool is_half(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

void check_dim(const char* op, const char* name, const at::Tensor& t, int64_t dim) {
  TORCH_CHECK_VALUE(t.dim() == dim, op, ": '", name, "' must be ", dim, "-D, got a ",
                    t.dim(), "-D tensor of shape ", t.sym_sizes());
}

void check_same_device(const char* op, const char* name, const at::Tensor& t,
                       const at::Tensor& input) {
  TORCH_CHECK_VALUE(t.device() == input.device(), op, ": '", name,
                    "' must be on the same device as 'input' (", input.device(), "), got ",
                    t.device());
}

void check_length(const char* op, const char* name, const at::Tensor& t,
                  const c10::SymInt& length, const char* what) {
  TORCH_CHECK_VALUE(t.sym_size(0) == length, op, ": '", name, "' must have length ",
                    what, " = ", length, ", got ", t.sym_size(0));
}

void check_label_smoothing(const char* op, double label_smoothing) {
  TORCH_CHECK_VALUE(label_smoothing == 0.0, op,
                    ": 'label_smoothing' must be 0.0 (only 0.0 is supported, as on the NPU), got ",
                    label_smoothing);
}

// One int32/int64 target per row: 1-D of length BT, on input's device.
void check_row_targets(const char* op, const char* name, const at::Tensor& t,
                       const c10::SymInt& bt, const at::Tensor& input) {
  const at::ScalarType type = t.scalar_type();
  TORCH_CHECK_TYPE(type == at::kInt || type == at::kLong, op, ": '", name,
                   "' must be torch.int32 or torch.int64, got ", dtype_name(type));
  check_dim(op, name, t, 1);
  check_length(op, name, t, bt, "BT (input.size(0))");
  check_same_device(op, name, t, input);
}

// input [BT, H] and weight [V, H] of the LM head: one half dtype, matching H, one device.
void check_lm_head(const char* op, const at::Tensor& input, const at::Tensor& weight) {
  TORCH_CHECK_TYPE(is_half(input.scalar_type()), op,
                   ": 'input' must be torch.float16 or torch.bfloat16, got ",
                   dtype_name(input.scalar_type()));
  check_dim(op, "input", input, 2);
  const c10::SymInt h = input.sym_size(1);

  TORCH_CHECK_TYPE(weight.scalar_type() == input.scalar_type(), op,
                   ": 'weight' must have the dtype of 'input' (",
                   dtype_name(input.scalar_type()), "), got ",
                   dtype_name(weight.scalar_type()));
  check_dim(op, "weight", weight, 2);
  TORCH_CHECK_VALUE(weight.sym_size(1) == h, op, ": 'weight' must be [V, H] with H = ", h,
                    " (input.size(1)), got shape ", weight.sym_sizes());
  check_same_device(op, "weight", weight, input);
}

}  // namespace

void check_fused_linear_cross_entropy_loss_grad(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    const at::Tensor& target_mask, const at::Tensor& masked_target, double label_smoothing,
    const std::optional<at::Tensor>& logits_max,
    const std::optional<at::Tensor>& sum_exp_logits,
    const std::optional<at::Tensor>& softmax, bool check_values) {
  const char* op = kFlce;
  check_lm_head(op, input, weight);
  const c10::SymInt bt = input.sym_size(0);
  const c10::SymInt v = weight.sym_size(0);

  TORCH_CHECK_TYPE(grad.scalar_type() == at::kFloat, op,
                   ": 'grad' must be torch.float32, got ", dtype_name(grad.scalar_type()));
  check_dim(op, "grad", grad, 1);
  check_length(op, "grad", grad, bt, "BT (input.size(0))");
  check_same_device(op, "grad", grad, input);

  check_row_targets(op, "masked_target", masked_target, bt, input);

  const at::ScalarType mask_type = target_mask.scalar_type();
  TORCH_CHECK_TYPE(mask_type == at::kByte || mask_type == at::kBool, op,
                   ": 'target_mask' must be bit-packed torch.uint8 or torch.bool, got ",
                   dtype_name(mask_type));
  check_dim(op, "target_mask", target_mask, 1);
  if (mask_type == at::kBool) {
    check_length(op, "target_mask", target_mask, bt, "BT (input.size(0)) for a bool mask");
  } else {
    const c10::SymInt packed_bytes = (bt + 7) / 8;
    TORCH_CHECK_VALUE(target_mask.sym_size(0) >= packed_bytes, op,
                      ": bit-packed 'target_mask' must hold at least ceil(BT / 8) = ",
                      packed_bytes, " bytes for BT = ", bt, ", got ",
                      target_mask.sym_size(0));
  }
  check_same_device(op, "target_mask", target_mask, input);

  check_label_smoothing(op, label_smoothing);

  if (softmax.has_value()) {
    // High-performance mode: the forward kept the softmax.
    const at::Tensor& p = *softmax;
    TORCH_CHECK_TYPE(p.scalar_type() == at::kFloat, op,
                     ": 'softmax' must be torch.float32, got ", dtype_name(p.scalar_type()));
    check_dim(op, "softmax", p, 2);
    TORCH_CHECK_VALUE(p.sym_size(0) == bt && p.sym_size(1) == v, op,
                      ": 'softmax' must be [BT, V] = [", bt, ", ", v, "], got shape ",
                      p.sym_sizes());
    check_same_device(op, "softmax", p, input);
  } else {
    // Memory-saving mode: the softmax is recomputed from the row statistics.
    const std::pair<const char*, const std::optional<at::Tensor>*> stats[] = {
        {"logits_max", &logits_max}, {"sum_exp_logits", &sum_exp_logits}};
    for (const auto& [name, stat] : stats) {
      TORCH_CHECK_VALUE(stat->has_value(), op, ": '", name,
                        "' is required when 'softmax' is None (memory-saving mode), got None");
      const at::Tensor& t = **stat;
      TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, op, ": '", name,
                       "' must be torch.float32, got ", dtype_name(t.scalar_type()));
      check_dim(op, name, t, 1);
      check_length(op, name, t, bt, "BT (input.size(0))");
      check_same_device(op, name, t, input);
    }
  }

  if (check_values) {
    const int64_t rows = bt.expect_int();
    const int64_t vocab = v.expect_int();
    const std::vector<RowTarget> targets = row_targets(target_mask, masked_target, rows);
    for (int64_t i = 0; i < rows; ++i) {
      const RowTarget& t = targets[i];
      TORCH_CHECK_VALUE(t.masked || (t.column >= 0 && t.column < vocab), op,
                        ": 'masked_target' must lie in [0, V) = [0, ", vocab,
                        ") on rows that are not masked, got masked_target[", i, "] = ", t.column);
    }
  }
}

void check_scratch_bytes(const char* op, std::optional<int64_t> scratch_bytes) {
  TORCH_CHECK_VALUE(!scratch_bytes.has_value() || *scratch_bytes > 0, op,
                    ": 'scratch_bytes' must be a positive number of bytes or None, got ",
                    scratch_bytes.value_or(0));
}

void check_batch_norm_reduce_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight) {
  const char* op = kBn;
  const auto check_data_dtype = [op](const char* name, const at::Tensor& t) {
    const at::ScalarType s = t.scalar_type();
    TORCH_CHECK_TYPE(s == at::kFloat || is_half(s), op, ": '", name,
                     "' must be torch.float32, torch.float16 or torch.bfloat16, got ",
                     dtype_name(s));
  };
  check_data_dtype("input", input);
  TORCH_CHECK_VALUE(input.dim() >= 2 && input.dim() <= 8, op,
                    ": 'input' must have 2 to 8 dims [N, C, *], got a ", input.dim(),
                    "-D tensor of shape ", input.sym_sizes());
  const c10::SymInt c = input.sym_size(1);
  TORCH_CHECK_VALUE(c >= 1, op, ": 'input' must have at least one channel (C = size(1) >= 1), got shape ",
                    input.sym_sizes());

  check_data_dtype("grad_out", grad_out);
  TORCH_CHECK_TYPE(grad_out.scalar_type() == input.scalar_type(), op,
                   ": 'grad_out' must have the dtype of 'input' (",
                   dtype_name(input.scalar_type()), "), got ",
                   dtype_name(grad_out.scalar_type()));
  TORCH_CHECK_VALUE(grad_out.sym_sizes() == input.sym_sizes(), op,
                    ": 'grad_out' must have the shape of 'input' ", input.sym_sizes(),
                    ", got ", grad_out.sym_sizes());
  check_same_device(op, "grad_out", grad_out, input);

  const auto check_per_channel = [&](const char* name, const at::Tensor& t) {
    check_data_dtype(name, t);
    check_dim(op, name, t, 1);
    check_length(op, name, t, c, "C (input.size(1))");
    check_same_device(op, name, t, input);
  };
  check_per_channel("mean", mean);
  check_per_channel("invstd", invstd);
  if (weight.has_value()) {
    check_per_channel("weight", *weight);
  }
}

void check_fused_linear_online_max_sum(
    const at::Tensor& input, const at::Tensor& weight, const at::Tensor& target,
    int64_t vocab_start_index, int64_t vocab_end_index) {
  const char* op = kOnline;
  check_lm_head(op, input, weight);
  const c10::SymInt bt = input.sym_size(0);
  const c10::SymInt v = weight.sym_size(0);

  check_row_targets(op, "target", target, bt, input);

  TORCH_CHECK_VALUE(vocab_start_index >= 0, op,
                    ": 'vocab_start_index' must be >= 0, got ", vocab_start_index);
  TORCH_CHECK_VALUE(vocab_end_index >= vocab_start_index, op,
                    ": 'vocab_end_index' must be >= vocab_start_index = ", vocab_start_index,
                    ", got ", vocab_end_index);
  // End exclusive: the shard's columns are [start, end), at most V of them.
  TORCH_CHECK_VALUE(v >= vocab_end_index - vocab_start_index, op,
                    ": 'vocab_end_index' must be <= vocab_start_index + V = ",
                    vocab_start_index, " + ", v, " (the shard holds weight.size(0) columns), got ",
                    vocab_end_index);
}

void check_fused_cross_entropy_loss_with_max_sum(
    const at::Tensor& logits_max, const at::Tensor& sum_exp_logits,
    const at::Tensor& predicted_logits, double label_smoothing,
    const std::optional<at::Tensor>& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& vocab_parallel_logits) {
  const char* op = kLoss;
  TORCH_CHECK_TYPE(logits_max.scalar_type() == at::kFloat, op,
                   ": 'logits_max' must be torch.float32, got ",
                   dtype_name(logits_max.scalar_type()));
  check_dim(op, "logits_max", logits_max, 1);
  const c10::SymInt bt = logits_max.sym_size(0);
  const std::pair<const char*, const at::Tensor*> stats[] = {
      {"sum_exp_logits", &sum_exp_logits}, {"predicted_logits", &predicted_logits}};
  for (const auto& [name, t] : stats) {
    TORCH_CHECK_TYPE(t->scalar_type() == at::kFloat, op, ": '", name,
                     "' must be torch.float32, got ", dtype_name(t->scalar_type()));
    check_dim(op, name, *t, 1);
    check_length(op, name, *t, bt, "BT (logits_max.size(0))");
    TORCH_CHECK_VALUE(t->device() == logits_max.device(), op, ": '", name,
                      "' must be on the device of 'logits_max' (", logits_max.device(),
                      "), got ", t->device());
  }
  check_label_smoothing(op, label_smoothing);
  TORCH_CHECK_VALUE(!input.has_value(), op,
                    ": 'input' must be None (only None is supported, as on the NPU), got a tensor");
  TORCH_CHECK_VALUE(!weight.has_value(), op,
                    ": 'weight' must be None (only None is supported, as on the NPU), got a tensor");
  if (vocab_parallel_logits.has_value()) {
    const at::Tensor& logits = *vocab_parallel_logits;
    const at::ScalarType s = logits.scalar_type();
    TORCH_CHECK_TYPE(s == at::kFloat || is_half(s), op,
                     ": 'vocab_parallel_logits' must be torch.float32, torch.float16 or "
                     "torch.bfloat16, got ", dtype_name(s));
    check_dim(op, "vocab_parallel_logits", logits, 2);
    check_length(op, "vocab_parallel_logits", logits, bt, "BT (logits_max.size(0)) in dim 0");
    TORCH_CHECK_VALUE(logits.device() == logits_max.device(), op,
                      ": 'vocab_parallel_logits' must be on the device of 'logits_max' (",
                      logits_max.device(), "), got ", logits.device());
  }
}

at::ScalarType batch_norm_reduce_output_dtype(at::ScalarType input, at::ScalarType mean) {
  return input == at::kHalf && mean == at::kHalf ? at::kHalf : at::kFloat;
}

}  // namespace ascend_ops
