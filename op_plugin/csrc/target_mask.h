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

// The value of the padding bits (rows BT .. 8 * ceil(BT / 8) - 1 of the last byte) of the
// bit-packed mask fused_linear_online_max_sum writes for the id range [start, end) (SPEC §3).
// CANN's kernel pads `target` with 0 up to whole bytes and masks the padding rows by the
// same rule as the real ones, so a padding bit is 0 on the shard that owns id 0 and 1 on
// every other shard. No reader of the mask looks at these bits.
inline bool padding_row_masked(int64_t vocab_start_index, int64_t vocab_end_index) {
  return 0 < vocab_start_index || 0 >= vocab_end_index;
}

}  // namespace ascend_ops
