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

// aclFormat values (CANN's acl_base.h): the formats whose memory layout is the logical
// one. Everything else (NC1HWC0, FRACTAL_Z, FRACTAL_NZ, ...) is an internal layout.
constexpr int64_t kFormatNchw = 0, kFormatNhwc = 1, kFormatNd = 2, kFormatNcdhw = 30,
                  kFormatNc = 35, kFormatNcl = 47;

bool is_base_format(int64_t format) {
  return format == kFormatNchw || format == kFormatNhwc || format == kFormatNd ||
         format == kFormatNcdhw || format == kFormatNc || format == kFormatNcl;
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

at::Tensor pack_bool_mask(const at::Tensor& mask) {
  const int64_t rows = mask.size(0);
  const int64_t bytes = (rows + 7) / 8;
  // Pad with masked rows up to whole bytes: [bytes * 8] -> [bytes, 8] bits as int32.
  const at::Tensor bits =
      at::constant_pad_nd(mask.to(at::kInt), {0, bytes * 8 - rows}, 1).view({bytes, 8});
  at::Tensor packed = bits.select(1, 0).clone();
  for (int64_t bit = 1; bit < 8; ++bit) {
    packed.add_(bits.select(1, bit), /*alpha=*/int64_t{1} << bit);  // LSB first
  }
  return packed.to(at::kByte);
}

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
    at::Tensor masked = mask;
    if (mask.scalar_type() != at::kBool) {
      // Unpack bit i % 8 of byte i / 8 for each row: floor(byte / 2^k) mod 2.
      const at::Tensor bytes = mask.slice(0, 0, (rows + 7) / 8).to(at::kInt);
      std::vector<at::Tensor> bits;
      for (int64_t bit = 0; bit < 8; ++bit) {
        bits.push_back(at::remainder(at::div(bytes, int64_t{1} << bit, "floor"), 2));
      }
      masked = at::stack(bits, 1).reshape({-1}).slice(0, 0, rows).to(at::kBool);
    }
    const at::Tensor outside = at::logical_or(masked_target.lt(0), masked_target.ge(vocab));
    const at::Tensor any_bad = at::logical_and(outside, at::logical_not(masked)).any();
    at::_assert_async(at::logical_not(any_bad),
                      "fused_linear_cross_entropy_loss_grad: 'masked_target' must lie in "
                      "[0, V) on rows that are not masked (device-side check; rerun with "
                      "ASCEND_OPS_NPU_CHECK_TARGETS=1 to learn the row)");
  }
}

}  // namespace ascend_ops::npu
