#include "validation.h"

#include "target_mask.h"

#include <ATen/MemoryOverlap.h>
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

namespace {

// ---- batch norm (SPEC §2) ----

bool is_bn_dtype(at::ScalarType s, bool allow_float64) {
  return s == at::kFloat || is_half(s) || (allow_float64 && s == at::kDouble);
}

const char* bn_dtypes(bool allow_float64) {
  return allow_float64 ? "torch.float32, torch.float64, torch.float16 or torch.bfloat16"
                       : "torch.float32, torch.float16 or torch.bfloat16";
}

void check_bn_dtype(const char* op, const char* name, const at::Tensor& t, bool allow_float64) {
  TORCH_CHECK_TYPE(is_bn_dtype(t.scalar_type(), allow_float64), op, ": '", name, "' must be ",
                   bn_dtypes(allow_float64), ", got ", dtype_name(t.scalar_type()));
}

// input [N, C, *]: a batch-norm dtype, 2..max_dims dims (no upper limit when max_dims
// is kAnyDims), C >= 1.
constexpr int64_t kAnyDims = -1;
void check_bn_input(const char* op, const at::Tensor& input, bool allow_float64,
                    int64_t max_dims) {
  check_bn_dtype(op, "input", input, allow_float64);
  if (max_dims == kAnyDims) {
    TORCH_CHECK_VALUE(input.dim() >= 2, op, ": 'input' must have at least 2 dims [N, C, *], got a ",
                      input.dim(), "-D tensor of shape ", input.sym_sizes());
  } else {
    TORCH_CHECK_VALUE(input.dim() >= 2 && input.dim() <= max_dims, op,
                      ": 'input' must have 2 to ", max_dims, " dims [N, C, *], got a ",
                      input.dim(), "-D tensor of shape ", input.sym_sizes());
  }
  TORCH_CHECK_VALUE(input.sym_size(1) >= 1, op,
                    ": 'input' must have at least one channel (C = size(1) >= 1), got shape ",
                    input.sym_sizes());
}

// A 1-D per-channel tensor of length C on input's device.
void check_bn_per_channel(const char* op, const char* name, const at::Tensor& t,
                          const at::Tensor& input, bool allow_float64) {
  check_bn_dtype(op, name, t, allow_float64);
  check_dim(op, name, t, 1);
  check_length(op, name, t, input.sym_size(1), "C (input.size(1))");
  check_same_device(op, name, t, input);
}

void check_bn_grad_out(const char* op, const at::Tensor& grad_out, const at::Tensor& input) {
  TORCH_CHECK_TYPE(grad_out.scalar_type() == input.scalar_type(), op,
                   ": 'grad_out' must have the dtype of 'input' (",
                   dtype_name(input.scalar_type()), "), got ",
                   dtype_name(grad_out.scalar_type()));
  TORCH_CHECK_VALUE(grad_out.sym_sizes() == input.sym_sizes(), op,
                    ": 'grad_out' must have the shape of 'input' ", input.sym_sizes(),
                    ", got ", grad_out.sym_sizes());
  check_same_device(op, "grad_out", grad_out, input);
}

void check_reduce_backward(const char* op, const at::Tensor& grad_out, const at::Tensor& input,
                           const at::Tensor& mean, const at::Tensor& invstd,
                           const std::optional<at::Tensor>& weight, bool allow_float64,
                           int64_t max_dims) {
  check_bn_input(op, input, allow_float64, max_dims);
  check_bn_dtype(op, "grad_out", grad_out, allow_float64);
  check_bn_grad_out(op, grad_out, input);
  check_bn_per_channel(op, "mean", mean, input, allow_float64);
  check_bn_per_channel(op, "invstd", invstd, input, allow_float64);
  if (weight.has_value()) {
    check_bn_per_channel(op, "weight", *weight, input, allow_float64);
  }
}

}  // namespace

void check_batch_norm_reduce_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight) {
  // 2..8 dims: the NPU kernel's limit, kept on every backend of the op.
  check_reduce_backward(kBn, grad_out, input, mean, invstd, weight, /*allow_float64=*/false, 8);
}

void check_aten_batch_norm_backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight) {
  check_reduce_backward("batch_norm_backward_reduce", grad_out, input, mean, invstd, weight,
                        /*allow_float64=*/true, kAnyDims);
}

void check_batch_norm_stats(const at::Tensor& input, double eps) {
  const char* op = "batch_norm_stats";
  check_bn_input(op, input, true, kAnyDims);
  TORCH_CHECK_VALUE(eps >= 0.0, op, ": 'eps' must be >= 0, got ", eps);
}

void check_batch_norm_gather_stats(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    double eps, const at::Tensor& counts) {
  const char* op = "batch_norm_gather_stats_with_counts";
  check_bn_input(op, input, true, kAnyDims);
  TORCH_CHECK_VALUE(eps >= 0.0, op, ": 'eps' must be >= 0, got ", eps);
  const c10::SymInt c = input.sym_size(1);
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"mean", &mean},
                                {"invstd", &invstd}}) {
    check_bn_dtype(op, name, *t, true);
    check_dim(op, name, *t, 2);
    TORCH_CHECK_VALUE(t->sym_size(1) == c, op, ": '", name,
                      "' must be [world, C] with C = input.size(1) = ", c, ", got shape ",
                      t->sym_sizes());
    check_same_device(op, name, *t, input);
  }
  TORCH_CHECK_VALUE(invstd.sym_sizes() == mean.sym_sizes(), op,
                    ": 'invstd' must have the shape of 'mean' ", mean.sym_sizes(), ", got ",
                    invstd.sym_sizes());
  TORCH_CHECK_TYPE(at::isFloatingType(counts.scalar_type()) ||
                       at::isIntegralType(counts.scalar_type(), /*includeBool=*/false),
                   op, ": 'counts' must be a floating or integer tensor, got ",
                   dtype_name(counts.scalar_type()));
  TORCH_CHECK_VALUE(counts.dim() == 1 && counts.sym_size(0) == mean.sym_size(0), op,
                    ": 'counts' must be 1-D with one count per row of 'mean' (",
                    mean.sym_size(0), "), got shape ", counts.sym_sizes());
  check_same_device(op, "counts", counts, input);
  if (running_mean.has_value()) {
    check_bn_per_channel(op, "running_mean", *running_mean, input, true);
  }
  if (running_var.has_value()) {
    check_bn_per_channel(op, "running_var", *running_var, input, true);
  }
  // Both are written in place, so what copy_ would refuse halfway (an expanded or
  // self-overlapping view) or would garble (the two sharing memory) is refused here,
  // before either is touched.
  for (const auto& [name, t] : {std::pair<const char*, const std::optional<at::Tensor>*>{
                                    "running_mean", &running_mean},
                                {"running_var", &running_var}}) {
    TORCH_CHECK_VALUE(!t->has_value() || at::has_internal_overlap(**t) != at::MemOverlap::Yes, op,
                      ": '", name, "' is written in place and must not be an expanded or "
                      "self-overlapping view, got strides ", (*t)->strides(), " for shape ",
                      (*t)->sizes());
  }
  if (running_mean.has_value() && running_var.has_value()) {
    const at::MemOverlapStatus shared = at::get_overlap_status(*running_mean, *running_var);
    TORCH_CHECK_VALUE(shared != at::MemOverlapStatus::Full && shared != at::MemOverlapStatus::Partial,
                      op, ": 'running_var' must not share memory with 'running_mean' (both are "
                      "written in place), got overlapping tensors");
  }
}

void check_batch_norm_elemt(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                            const at::Tensor& invstd) {
  const char* op = "batch_norm_elemt";
  check_bn_input(op, input, true, kAnyDims);
  check_bn_per_channel(op, "mean", mean, input, true);
  check_bn_per_channel(op, "invstd", invstd, input, true);
  if (weight.has_value()) {
    check_bn_per_channel(op, "weight", *weight, input, true);
  }
  if (bias.has_value()) {
    check_bn_per_channel(op, "bias", *bias, input, true);
  }
}

void check_batch_norm_backward_elemt(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, const at::Tensor& sum_dy,
    const at::Tensor& sum_dy_xmu, const at::Tensor& count) {
  const char* op = "batch_norm_backward_elemt";
  check_bn_input(op, input, true, kAnyDims);
  check_bn_grad_out(op, grad_out, input);
  check_bn_per_channel(op, "mean", mean, input, true);
  check_bn_per_channel(op, "invstd", invstd, input, true);
  if (weight.has_value()) {
    check_bn_per_channel(op, "weight", *weight, input, true);
  }
  check_bn_per_channel(op, "sum_dy", sum_dy, input, true);
  check_bn_per_channel(op, "sum_dy_xmu", sum_dy_xmu, input, true);
  TORCH_CHECK_TYPE(at::isFloatingType(count.scalar_type()) ||
                       at::isIntegralType(count.scalar_type(), /*includeBool=*/false),
                   op, ": 'count' must be an integer or floating tensor of per-rank counts, got ",
                   dtype_name(count.scalar_type()));
  TORCH_CHECK_VALUE(count.dim() == 1, op, ": 'count' must be 1-D (one count per rank), got shape ",
                    count.sym_sizes());
  check_same_device(op, "count", count, input);
}

at::ScalarType batch_norm_reduce_output_dtype(at::ScalarType input, at::ScalarType mean) {
  if (input == at::kDouble) {
    return at::kDouble;
  }
  return input == at::kHalf && mean == at::kHalf ? at::kHalf : at::kFloat;
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


}  // namespace ascend_ops
