// Decoding of the target mask shared by validation and the kernels (SPEC §1).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ascend_ops {

// One row's target: `masked` when it lives in another shard; otherwise `column` is its
// local column in this shard, exactly as given (any int64, so no value can stand for
// "masked": validation must be able to reject every out-of-range column).
struct RowTarget {
  bool masked;
  int64_t column;
};

// The targets of the first `rows` rows. `target_mask` is either the
// bit-packed uint8 form (row i masked when bit i % 8 of byte i / 8 is set, LSB first)
// or a bool tensor of length `rows`; `masked_target` is int32 or int64. Both may live on
// any device; they are read on the host. The caller has checked dtypes and lengths.
std::vector<RowTarget> row_targets(
    const at::Tensor& target_mask, const at::Tensor& masked_target, int64_t rows);

}  // namespace ascend_ops
