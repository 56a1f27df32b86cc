// Runs the adapter's NPU kernels on CPU tensors against the recording test doubles and
// prints every recorded event, one per line, each scenario opened by "scenario <name>".
// NPU_LINK_HIGH_PERF_SHAPES="BT:V,..." adds one high-performance FLCE backward per shape
// (H = 8), recording phase 1 or "refused <message>".
#include "recorder.h"

#include "npu_ops.h"  // generated: the kernels' declarations
#include "flce_options_custom.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

int main() {
  using recorder::record;
  namespace npu = ascend_ops::npu;
  const at::Tensor input = at::randn({11, 8}).to(at::kBFloat16);
  const at::Tensor weight = at::randn({50, 8}).to(at::kBFloat16);
  const at::Tensor target = at::arange(95, 161, 6, at::kLong);  // 11 ids around [100, 150)

  record("scenario online_max_sum");
  npu::fused_linear_online_max_sum(input, weight, target, 100, 150, false);

  record("scenario online_max_sum_empty_range");
  npu::fused_linear_online_max_sum(input, weight, target, 100, 100, false);

  const at::Tensor grad = at::rand({11});
  const at::Tensor masked = target.lt(100).logical_or(target.ge(150));
  const at::Tensor columns = at::where(masked, 0, target - 100);
  const at::Tensor stats = at::zeros({11});
  const at::Tensor wide = at::randn({11, 16}).to(at::kBFloat16);
  const at::Tensor strided_input = wide.slice(1, 0, 8);  // [11, 8], row stride 16
  record("scenario flce_grad_bool_mask_strided_input");
  npu::fused_linear_cross_entropy_loss_grad(grad, strided_input, weight, masked, columns, 0.0,
                                            stats, stats + 1, std::nullopt, std::nullopt);

  record("scenario flce_grad_phase1_refused");
  recorder::next_phase1_status() = 161002;
  try {
    npu::fused_linear_cross_entropy_loss_grad(grad, input, weight, masked, columns, 0.0, stats,
                                              stats + 1, std::nullopt, std::nullopt);
    record("no error");
  } catch (const std::exception& e) {
    record(std::string("error ") + (std::string(e.what()).find("161002") != std::string::npos
                                         ? "161002"
                                         : "other"));
  }
  recorder::next_phase1_status() = 0;

  // Targets outside [0, V) = [0, 200) on unmasked rows 1, 4 and 9 (-1, 200, 257); only
  // row 0 (in range) is masked. V = 200: high-performance mode needs V >= 128.
  const at::Tensor wild = at::tensor({3, -1, 7, 0, 200, 199, 2, 1, 8, 257, 4}, at::kLong);
  const at::Tensor wild_mask = at::arange(11).eq(0);
  const at::Tensor wide_weight = at::randn({200, 8}).to(at::kBFloat16);
  const at::Tensor softmax = at::softmax(at::randn({11, 200}), 1);
  record("scenario flce_grad_high_perf_out_of_range_bool_mask");
  npu::fused_linear_cross_entropy_loss_grad(grad, input, wide_weight, wild_mask, wild, 0.0,
                                            std::nullopt, std::nullopt, softmax.clone(),
                                            std::nullopt);
  record("scenario flce_grad_memory_saving_out_of_range_bool_mask");
  npu::fused_linear_cross_entropy_loss_grad(grad, input, wide_weight, wild_mask, wild, 0.0,
                                            stats, stats + 1, std::nullopt, std::nullopt);
  // The packed form: row 0 masked, padding bits (rows 11-15) set, as CANN's forward writes them.
  const at::Tensor packed = at::tensor({1, 0xF8}, at::kByte);
  record("scenario flce_grad_custom_out_of_range_packed_mask");
  npu::fused_linear_cross_entropy_loss_grad_custom(grad, input, wide_weight, packed, wild, 0.0,
                                                   stats, stats + 1, std::nullopt, std::nullopt);

  // The loss options' entry (SPEC §7): the coefficients for grad, bias and class weights,
  // scale and cap as the generated API's attributes; the bool mask packed, targets folded.
  record("scenario flce_grad_options_custom");
  const at::Tensor alpha = at::rand({11}), beta = at::rand({11}), gamma = at::rand({11});
  const at::Tensor bias = at::randn({200}), class_weight = at::rand({200});
  npu::fused_linear_cross_entropy_loss_grad_options_custom(
      input, wide_weight, wild_mask, wild, stats, stats + 1, alpha, beta, gamma, bias,
      class_weight, 0.5, 30.0);
  record("scenario flce_grad_options_custom_bad_beta");
  try {
    npu::fused_linear_cross_entropy_loss_grad_options_custom(
        input, wide_weight, wild_mask, wild, stats, stats + 1, alpha, beta.slice(0, 0, 10),
        gamma, std::nullopt, std::nullopt, 1.0, 0.0);
    record("no error");
  } catch (const c10::Error& e) {
    record(std::string("refused ") + e.what_without_backtrace());
  }

  record("scenario flce_grad_nc_format");
  recorder::npu_format() = 35;  // ACL_FORMAT_NC: torch_npu casts it to ND before aclnn
  npu::fused_linear_cross_entropy_loss_grad(grad, input, weight, masked, columns, 0.0, stats,
                                            stats + 1, std::nullopt, std::nullopt);
  recorder::npu_format() = 2;

  // float32 heads: CANN's ops take float16 / bfloat16 only, so the adapter refuses them
  // before any aclnn call (the Hugging Face integration relies on it: docs/npu.md).
  const at::Tensor input32 = input.to(at::kFloat);
  const at::Tensor weight32 = weight.to(at::kFloat);
  record("scenario online_max_sum_float32_refused");
  try {
    npu::fused_linear_online_max_sum(input32, weight32, target, 100, 150, false);
    record("no error");
  } catch (const c10::TypeError& e) {
    record(std::string("refused ") + e.what_without_backtrace());
  }
  record("scenario flce_grad_float32_refused");
  try {
    npu::fused_linear_cross_entropy_loss_grad(grad, input32, weight32, masked, columns, 0.0,
                                              stats, stats + 1, std::nullopt, std::nullopt);
    record("no error");
  } catch (const c10::TypeError& e) {
    record(std::string("refused ") + e.what_without_backtrace());
  }

  if (const char* shapes = std::getenv("NPU_LINK_HIGH_PERF_SHAPES")) {
    std::stringstream list(shapes);
    std::string shape;
    while (std::getline(list, shape, ',')) {
      const int64_t bt = std::stoll(shape.substr(0, shape.find(':')));
      const int64_t v = std::stoll(shape.substr(shape.find(':') + 1));
      record("scenario flce_grad_high_perf_" + std::to_string(bt) + "x" + std::to_string(v));
      const at::Tensor x = at::zeros({bt, 8}, at::kBFloat16);
      const at::Tensor w = at::zeros({v, 8}, at::kBFloat16);
      try {
        npu::fused_linear_cross_entropy_loss_grad(
            at::ones({bt}), x, w, at::zeros({bt}, at::kBool), at::zeros({bt}, at::kLong), 0.0,
            std::nullopt, std::nullopt, at::full({bt, v}, 1.0f / static_cast<float>(v)),
            std::nullopt);
      } catch (const c10::NotImplementedError& e) {
        record(std::string("refused ") + e.what_without_backtrace());
      }
    }
  }
  for (const std::string& event : recorder::recorded_events()) {
    std::cout << event << "\n";
  }
  return 0;
}
