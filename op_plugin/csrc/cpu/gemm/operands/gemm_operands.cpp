#include "gemm_operands.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <limits>

namespace ascend_ops {
namespace cpu {
namespace {

// How a BLAS-style engine sees a 2-D operand: `outer` lines of `extent` contiguous
// elements, `ld` elements apart (row-major: rows of cols; column-major: columns of rows).
struct Layout {
  bool strided_lines = false;  // one of the two strides is 1
  int64_t outer = 0;
  int64_t extent = 0;
  int64_t ld = 0;
};

Layout layout_of(const at::Tensor& m) {
  if (m.stride(1) == 1) {
    return {true, m.size(0), m.size(1), m.stride(0)};
  }
  if (m.stride(0) == 1) {
    return {true, m.size(1), m.size(0), m.stride(1)};
  }
  return {};
}

// ±0 in any of the element sizes the kernels hand over (bf16/float16, float32).
bool is_zero(const char* element, size_t size) {
  if (size == 2) {
    uint16_t bits;
    std::memcpy(&bits, element, 2);
    return (bits & 0x7FFFu) == 0;
  }
  uint32_t bits;
  std::memcpy(&bits, element, 4);
  return (bits & 0x7FFFFFFFu) == 0;
}

enum class Padding { kNone, kZero, kOther };

Padding padding_of(const at::Tensor& m) {
  const Layout layout = layout_of(m);
  if (m.numel() == 0 || (layout.strided_lines && layout.ld == layout.extent)) {
    return Padding::kNone;
  }
  // One line with a smaller stride (a size-1 dimension's stride means nothing): no ld
  // beyond the line, so an engine is told ld = extent.
  if (layout.strided_lines && layout.outer == 1 && layout.ld < layout.extent) {
    return Padding::kNone;
  }
  const auto size = static_cast<size_t>(m.element_size());
  if (!layout.strided_lines || layout.ld < layout.extent || (size != 2 && size != 4)) {
    return Padding::kOther;  // no BLAS layout: an engine would be handed a copy anyway
  }
  // The last line's padding must lie inside the storage, or it is not ours to read.
  const int64_t last = m.storage_offset() + layout.outer * layout.ld;
  if (static_cast<size_t>(last) * size > m.storage().nbytes()) {
    return Padding::kOther;
  }
  const char* base = static_cast<const char*>(m.const_data_ptr());
  for (int64_t line = 0; line < layout.outer; ++line) {
    const char* pad = base + (line * layout.ld + layout.extent) * static_cast<int64_t>(size);
    for (int64_t j = 0; j < layout.ld - layout.extent; ++j) {
      if (!is_zero(pad + j * static_cast<int64_t>(size), size)) {
        return Padding::kOther;
      }
    }
  }
  return Padding::kZero;
}

}  // namespace

bool dense_or_zero_padded(const at::Tensor& matrix) {
  TORCH_INTERNAL_ASSERT(matrix.dim() == 2);
  return padding_of(matrix) != Padding::kOther;
}

at::Tensor engine_ready(const at::Tensor& matrix) {
  if (dense_or_zero_padded(matrix)) {
    return matrix;
  }
  // Explicit strides: .contiguous() would keep a one-row view with its row stride.
  at::Tensor dense = at::empty(matrix.sizes(), matrix.options());
  dense.copy_(matrix);
  return dense;
}

void check_handed_operand(const at::Tensor& matrix, const char* role, GemmEngine engine) {
  if (!gemm_operand_check_enabled()) {
    return;
  }
  TORCH_CHECK(dense_or_zero_padded(matrix), "GEMM operand ", role, " ", matrix.sizes(),
              " with strides ", matrix.strides(), " handed to the ", engine_name(engine),
              " engine is neither dense nor zero-padded: oneDNN's AMX kernels read the "
              "padding up to the leading dimension (ASCEND_OPS_CPU_CHECK_GEMM_OPERANDS=1)");
}

at::Tensor scratch_empty(at::IntArrayRef sizes, const at::TensorOptions& options) {
  at::Tensor t = at::empty(sizes, options);
  if (scratch_poison_enabled() && at::isFloatingType(t.scalar_type())) {
    t.fill_(std::numeric_limits<double>::quiet_NaN());
  }
  return t;
}

void zero_padding_columns(at::Tensor& buffer, int64_t used_cols) {
  TORCH_INTERNAL_ASSERT(buffer.dim() == 2 && used_cols <= buffer.size(1));
  if (used_cols < buffer.size(1)) {
    buffer.narrow(1, used_cols, buffer.size(1) - used_cols).zero_();
  }
}

}  // namespace cpu
}  // namespace ascend_ops
