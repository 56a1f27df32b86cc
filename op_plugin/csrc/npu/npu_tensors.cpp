#include "npu_tensors.h"

#include "../target_mask.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include "torch_npu/csrc/core/npu/NPUFormat.h"

#include <cstdlib>
#include <vector>

namespace ascend_ops::npu {
namespace {

// aclFormat values (CANN's acl_base.h): the formats torch_npu passes to an aclnn op as
// they are, FormatHelper::IsOpInputBaseFormat's list (ND, NCHW, NHWC, NCDHW). Everything
// else (NC1HWC0, FRACTAL_Z, FRACTAL_NZ, and NC / NCL, which torch_npu also casts) is
// cast to its base format first.
constexpr int64_t kFormatNchw = 0, kFormatNhwc = 1, kFormatNd = 2, kFormatNcdhw = 30;

bool is_base_format(int64_t format) {
  return format == kFormatNchw || format == kFormatNhwc || format == kFormatNd ||
         format == kFormatNcdhw;
}

}  // namespace

at::Tensor as_aclnn_input(const at::Tensor& t, Strides strides) {
  at::Tensor out = t;
  if (!is_base_format(at_npu::native::get_npu_format(out))) {
    const int64_t base = out.dim() == 4 ? kFormatNchw : out.dim() == 5 ? kFormatNcdhw : kFormatNd;
    out = at_npu::native::npu_format_cast(out, base);
  }
  if (strides == Strides::kAnyView || out.is_contiguous()) {
    return out;
  }
  return out.contiguous();
}

namespace {

// Bool [rows] -> bit-packed uint8 [ceil(rows/8)], LSB first, padding bits `pad`.
at::Tensor pack_bits(const at::Tensor& bits_in, int64_t pad) {
  const int64_t rows = bits_in.size(0);
  const int64_t bytes = (rows + 7) / 8;
  // [bytes * 8] -> [bytes, 8] bits as int32.
  const at::Tensor bits =
      at::constant_pad_nd(bits_in.to(at::kInt), {0, bytes * 8 - rows}, pad).view({bytes, 8});
  at::Tensor packed = bits.select(1, 0).clone();
  for (int64_t bit = 1; bit < 8; ++bit) {
    packed.add_(bits.select(1, bit), /*alpha=*/int64_t{1} << bit);  // LSB first
  }
  return packed.to(at::kByte);
}

// Bit-packed uint8 mask -> bool [rows]: bit i % 8 of byte i / 8, floor(byte / 2^k) mod 2.
at::Tensor unpack_bits(const at::Tensor& mask, int64_t rows) {
  const at::Tensor bytes = mask.slice(0, 0, (rows + 7) / 8).to(at::kInt);
  std::vector<at::Tensor> bits;
  for (int64_t bit = 0; bit < 8; ++bit) {
    bits.push_back(at::remainder(at::div(bytes, int64_t{1} << bit, "floor"), 2));
  }
  return at::stack(bits, 1).reshape({-1}).slice(0, 0, rows).to(at::kBool);
}

at::Tensor targets_outside(const at::Tensor& masked_target, int64_t vocab) {
  return at::logical_or(masked_target.lt(0), masked_target.ge(vocab));  // [BT] bool
}

}  // namespace

at::Tensor pack_bool_mask(const at::Tensor& mask) { return pack_bits(mask, 1); }

std::string target_check_mode() {
  static const std::string mode = [] {
    const char* debug = std::getenv("ASCEND_OPS_NPU_CHECK_TARGETS");
    if (debug != nullptr && std::string(debug) == "1") {
      return std::string("host");
    }
    const auto op = c10::Dispatcher::singleton().findOp({"aten::_assert_async", "msg"});
    const bool device =
        op.has_value() && op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
    return std::string(device ? "device" : "off");
  }();
  return mode;
}

void check_targets(const at::Tensor& mask, const at::Tensor& masked_target, int64_t vocab) {
  const std::string mode = target_check_mode();
  const int64_t rows = masked_target.size(0);
  if (mode == "host") {
    const std::vector<RowTarget> targets = row_targets(mask, masked_target, rows);
    for (int64_t i = 0; i < rows; ++i) {
      TORCH_CHECK_VALUE(targets[i].masked || (targets[i].column >= 0 && targets[i].column < vocab),
                        "fused_linear_cross_entropy_loss_grad: 'masked_target' must lie in [0, V) = [0, ",
                        vocab, ") on rows that are not masked, got masked_target[", i,
                        "] = ", targets[i].column);
    }
  } else if (mode == "device" && rows > 0) {
    const at::Tensor masked = mask.scalar_type() == at::kBool ? mask : unpack_bits(mask, rows);
    const at::Tensor outside = targets_outside(masked_target, vocab);
    const at::Tensor any_bad = at::logical_and(outside, at::logical_not(masked)).any();
    at::_assert_async(at::logical_not(any_bad),
                      "fused_linear_cross_entropy_loss_grad: 'masked_target' must lie in "
                      "[0, V) on rows that are not masked (device-side check; rerun with "
                      "ASCEND_OPS_NPU_CHECK_TARGETS=1 to learn the row)");
  }
}

MaskedTargets fold_target_range(const at::Tensor& mask, const at::Tensor& masked_target,
                                int64_t vocab) {
  const at::Tensor outside = targets_outside(masked_target, vocab);  // [BT]
  at::Tensor folded_mask;
  if (mask.scalar_type() == at::kBool) {
    folded_mask = at::logical_or(mask, outside);
  } else {
    // OR the packed bits (padding 0): the caller's padding bits stay as they are.
    at::Tensor extra = pack_bits(outside, 0);
    if (mask.size(0) > extra.size(0)) {
      extra = at::constant_pad_nd(extra, {0, mask.size(0) - extra.size(0)}, 0);
    }
    folded_mask = at::bitwise_or(mask, extra);
  }
  // 0: a column of every non-empty shard (and a masked row's target is not read anyway).
  at::Tensor folded_target = at::where(outside, at::zeros({}, masked_target.options()), masked_target);
  return {folded_mask, folded_target};
}

}  // namespace ascend_ops::npu
