#include "gemm.h"

#include "../isa_builds.h"
#include "bf16_matrix.h"
#include "engines/amx/amx_kernels.h"
#include "engines/avx2/avx2_kernels.h"
#include "engines/avx512bf16/avx512_kernels.h"
#include "engines/mkl_gemm.h"
#include "engines/onednn.h"
#include "engines/portable.h"
#include "operands/gemm_operands.h"
#if ASCEND_OPS_X86_KERNELS
#include "engines/avx2/avx2_gemm.h"
#include "engines/avx512bf16/bf16_gemm.h"
#endif

namespace ascend_ops {
namespace cpu {
namespace {

#if ASCEND_OPS_X86_KERNELS
Bf16View bf16_view(const at::Tensor& t) {
  return Bf16View{reinterpret_cast<const uint16_t*>(t.const_data_ptr<at::BFloat16>()),
                  t.stride(0), t.stride(1)};
}
#endif

}  // namespace

WideningBuffer::WideningBuffer(at::Tensor room) : elements_(room.numel()), room_(std::move(room)) {
  TORCH_INTERNAL_ASSERT(room_.scalar_type() == at::kFloat && room_.dim() == 1 &&
                        (room_.numel() <= 1 || room_.stride(0) == 1));
}

at::Tensor WideningBuffer::widen(const at::Tensor& half) {
  TORCH_INTERNAL_ASSERT(half.dim() == 2 && half.numel() <= elements_);
  if (!room_.defined()) {
    room_ = scratch_empty({elements_}, half.options().dtype(at::kFloat));
  }
  const at::Tensor room = room_.narrow(0, 0, half.numel());
  if (half.stride(0) == 1 && half.stride(1) != 1 && half.size(0) > 1) {
    // A transposed view: copied along its contiguous columns, handed over column-major.
    at::Tensor dense = room.view({half.size(1), half.size(0)});
    dense.copy_(half.t());
    return dense.t();
  }
  at::Tensor dense = room.view(half.sizes());
  dense.copy_(half);
  return dense;
}

GemmOperand::GemmOperand(at::Tensor matrix) : storage_(std::make_shared<Storage>()) {
  TORCH_INTERNAL_ASSERT(matrix.dim() == 2, "GemmOperand: expected a matrix");
  storage_->matrix = std::move(matrix);
}

GemmOperand::GemmOperand(at::Tensor matrix, WideningBuffer* buffer) : GemmOperand(std::move(matrix)) {
  storage_->buffer = buffer;
}

GemmOperand GemmOperand::t() const {
  GemmOperand transposed = *this;
  transposed.transposed_ = !transposed_;
  return transposed;
}

at::Tensor GemmOperand::half() const {
  return transposed_ ? storage_->matrix.t() : storage_->matrix;
}

bool GemmOperand::is_widened() const { return storage_->f32.defined(); }

at::Tensor GemmOperand::widened() const {
  if (!storage_->f32.defined()) {
    storage_->f32 = storage_->buffer != nullptr
                        ? storage_->buffer->widen(storage_->matrix)
                        : storage_->matrix.to(at::kFloat, /*non_blocking=*/false, /*copy=*/false,
                                              at::MemoryFormat::Contiguous);
  }
  return transposed_ ? storage_->f32.t() : storage_->f32;
}

void gemm(const GemmOperand& a, const GemmOperand& b, at::Tensor& c, bool accumulate,
          GemmEngine engine) {
  TORCH_INTERNAL_ASSERT(a.cols() == b.rows() && c.size(0) == a.rows() && c.size(1) == b.cols() &&
                        c.scalar_type() == at::kFloat && (c.size(1) <= 1 || c.stride(1) == 1));
  TORCH_INTERNAL_ASSERT(engine_usable(engine, a.half().scalar_type()),
                        "gemm: engine ", engine_name(engine), " cannot run this dtype here");
#if ASCEND_OPS_X86_KERNELS
  if (is_own_gemm(engine)) {  // the own GEMMs share one signature
    const auto own_gemm = engine == GemmEngine::kAvx2 ? avx2_bf16_gemm
                          : engine == GemmEngine::kAmx ? amx_bf16_gemm
                                                        : bf16_gemm;
    own_gemm(bf16_view(a.half()), bf16_view(b.half()), a.rows(), b.cols(), a.cols(),
             c.mutable_data_ptr<float>(), c.stride(0), accumulate);
    return;
  }
#endif
  if (engine == GemmEngine::kMkl) {
    mkl_gemm(a, b, c, accumulate);
  } else if (engine == GemmEngine::kOneDnn) {
    onednn_gemm(a, b, c, accumulate);
  } else {
    portable_gemm(a, b, c, accumulate);
  }
}

void gemm_rounded(const GemmOperand& a, const GemmOperand& b, at::Tensor& out,
                  GemmEngine engine) {
  TORCH_INTERNAL_ASSERT(a.cols() == b.rows() && out.size(0) == a.rows() &&
                        out.size(1) == b.cols() && out.scalar_type() == a.half().scalar_type() &&
                        (out.size(1) <= 1 || out.stride(1) == 1));
  TORCH_INTERNAL_ASSERT(engine_usable(engine, a.half().scalar_type()),
                        "gemm_rounded: engine ", engine_name(engine), " cannot run this dtype here");
#if ASCEND_OPS_X86_KERNELS
  if (is_own_gemm(engine)) {
    const auto own_gemm_rounded = engine == GemmEngine::kAvx2 ? avx2_bf16_gemm_rounded
                                  : engine == GemmEngine::kAmx ? amx_bf16_gemm_rounded
                                                                : bf16_gemm_rounded;
    own_gemm_rounded(bf16_view(a.half()), bf16_view(b.half()), a.rows(), b.cols(), a.cols(),
                     bf16_bits(out), out.stride(0));
    return;
  }
#endif
  if (engine == GemmEngine::kMkl) {
    mkl_gemm_rounded(a, b, out);
  } else if (engine == GemmEngine::kOneDnn) {
    onednn_gemm_rounded(a, b, out);
  } else {
    portable_gemm_rounded(a, b, out);
  }
}

bool reads_half_in_place(GemmEngine engine) {
  return is_own_gemm(engine) || engine == GemmEngine::kMkl;
}

bool is_own_gemm(GemmEngine engine) {
  return engine == GemmEngine::kAmx || engine == GemmEngine::kAvx512Bf16 ||
         engine == GemmEngine::kAvx2;
}

std::vector<GemmEngine> available_gemm_engines() {
  std::vector<GemmEngine> engines;
  if (onednn_bf16_supported()) {
    engines.push_back(GemmEngine::kOneDnn);
  }
  if (mkl_bf16_gemm_available()) {
    engines.push_back(GemmEngine::kMkl);
  }
  if (amx_kernels_supported()) {
    engines.push_back(GemmEngine::kAmx);
  }
  if (avx512_kernels_supported()) {
    engines.push_back(GemmEngine::kAvx512Bf16);
  }
  if (avx2_kernels_supported()) {
    engines.push_back(GemmEngine::kAvx2);
  }
  engines.push_back(GemmEngine::kPortable);
  return engines;
}

bool engine_usable(GemmEngine engine, at::ScalarType dtype) {
  switch (engine) {
    case GemmEngine::kOneDnn:
      return dtype == at::kBFloat16 && onednn_bf16_supported();
    case GemmEngine::kMkl:
      return dtype == at::kBFloat16 && mkl_bf16_gemm_available();
    case GemmEngine::kAmx:
      return dtype == at::kBFloat16 && amx_kernels_supported();
    case GemmEngine::kAvx512Bf16:
      return dtype == at::kBFloat16 && avx512_kernels_supported();
    case GemmEngine::kAvx2:
      return dtype == at::kBFloat16 && avx2_kernels_supported();
    case GemmEngine::kPortable:
      return dtype == at::kBFloat16 || dtype == at::kHalf;
  }
  return false;
}

}  // namespace cpu
}  // namespace ascend_ops
