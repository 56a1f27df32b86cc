#include "target_mask.h"

#include <ATen/core/Tensor.h>

namespace ascend_ops {

std::vector<RowTarget> row_targets(
    const at::Tensor& target_mask, const at::Tensor& masked_target, int64_t rows) {
  const at::Tensor mask = target_mask.to(at::kCPU).contiguous();
  const at::Tensor target = masked_target.to(at::kCPU, at::kLong).contiguous();
  const int64_t* target_data = target.const_data_ptr<int64_t>();
  std::vector<RowTarget> targets(rows);
  if (mask.scalar_type() == at::kBool) {
    const bool* masked = mask.const_data_ptr<bool>();
    for (int64_t i = 0; i < rows; ++i) {
      targets[i] = {masked[i], target_data[i]};
    }
  } else {
    const uint8_t* bits = mask.const_data_ptr<uint8_t>();
    for (int64_t i = 0; i < rows; ++i) {
      targets[i] = {static_cast<bool>((bits[i / 8] >> (i % 8)) & 1), target_data[i]};
    }
  }
  return targets;
}

}  // namespace ascend_ops
