// Runs the adapter's NPU kernels on CPU tensors against the recording test doubles and
// prints every recorded event, one per line, each scenario opened by "scenario <name>".
#include "recorder.h"

#include "npu_ops.h"  // generated: the kernels' declarations

#include <ATen/ATen.h>

#include <iostream>

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
  for (const std::string& event : recorder::recorded_events()) {
    std::cout << event << "\n";
  }
  return 0;
}
