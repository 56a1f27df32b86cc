// aten::batch_norm_backward_reduce on CPU, served by batch_norm_reduce_backward (SPEC §2).
//
// aten's schema returns four non-optional Tensors; the outputs not asked for are
// undefined tensors (None in Python), where ours returns nullopt.
#include "../aten_registration.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ATen.h>
#include <torch/library.h>

#include <memory>
#include <mutex>

namespace ascend_ops {
namespace {

using MaybeTensor = std::optional<at::Tensor>;

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_reduce_cpu(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, bool input_g,
    bool weight_g, bool bias_g) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("ascend_ops::batch_norm_reduce_backward", "")
          .typed<std::tuple<MaybeTensor, MaybeTensor, MaybeTensor, MaybeTensor>(
              const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
              const std::optional<at::Tensor>&, bool, bool, bool)>();
  auto [sum_dy, sum_dy_xmu, grad_weight, grad_bias] =
      op.call(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g);
  const auto defined = [](MaybeTensor& t) { return t.has_value() ? *t : at::Tensor(); };
  return {defined(sum_dy), defined(sum_dy_xmu), defined(grad_weight), defined(grad_bias)};
}

}  // namespace

bool register_aten_batch_norm_backward_reduce_cpu() {
  // The library object must outlive the registration: it is kept for the process lifetime.
  static std::unique_ptr<torch::Library> library;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (library) {
    return false;
  }
  library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                             c10::DispatchKey::CPU, __FILE__, __LINE__);
  library->impl("batch_norm_backward_reduce", &batch_norm_backward_reduce_cpu);
  return true;
}

}  // namespace ascend_ops
