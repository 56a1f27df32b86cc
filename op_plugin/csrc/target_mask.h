// Decoding of the target mask shared by validation and the kernels (SPEC §1).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ascend_ops {

// Marks a masked row in the vector returned by target_columns.
constexpr int64_t kMaskedRow = -1;

// For each of the `rows` rows: the local column of its target in this shard, or
// kMaskedRow when its target lives in another shard. `target_mask` is either the
// bit-packed uint8 form (row i masked when bit i % 8 of byte i / 8 is set, LSB first)
// or a bool tensor of length `rows`; `masked_target` is int32 or int64. Both may live on
// any device; they are read on the host. The caller has checked dtypes and lengths.
std::vector<int64_t> target_columns(
    const at::Tensor& target_mask, const at::Tensor& masked_target, int64_t rows);

}  // namespace ascend_ops
