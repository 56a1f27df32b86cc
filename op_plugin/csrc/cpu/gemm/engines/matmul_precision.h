// oneDNN's fp32 matmul precision for the span of one product: BF16 for the onednn engine's
// fp32-out products (onednn.h), IEEE for the portable engine's (portable.h).
#pragma once

#include <ATen/Context.h>

#include <mutex>

namespace ascend_ops {
namespace cpu {

// Sets oneDNN's fp32 matmul precision for the lifetime of the guard and then restores what
// was there. The precision is process-wide state: the mutex keeps our own calls from
// restoring each other's setting; a user's fp32 matmul running on another Python thread
// at the same moment would see it too (documented in docs/cpu_kernels.md).
class MatmulPrecisionGuard {
 public:
  explicit MatmulPrecisionGuard(at::Float32Precision precision) : lock_(mutex()) {
    auto& context = at::globalContext();
    saved_ = context.float32Precision(at::Float32Backend::MKLDNN, at::Float32Op::MATMUL);
    context.setFloat32Precision(at::Float32Backend::MKLDNN, at::Float32Op::MATMUL, precision);
  }
  ~MatmulPrecisionGuard() {
    at::globalContext().setFloat32Precision(at::Float32Backend::MKLDNN, at::Float32Op::MATMUL,
                                            saved_);
  }
  MatmulPrecisionGuard(const MatmulPrecisionGuard&) = delete;
  MatmulPrecisionGuard& operator=(const MatmulPrecisionGuard&) = delete;

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  std::lock_guard<std::mutex> lock_;
  at::Float32Precision saved_ = at::Float32Precision::NONE;
};

}  // namespace cpu
}  // namespace ascend_ops
