// The sync-BN family's CPU kernels under aten's operators, which PyTorch serves only on
// CUDA/MPS (SPEC §2, §2b). Registered one operator at a time, from Python at import, and
// only where the dispatcher has no CPU kernel (a later PyTorch may bring its own).
#include "../../aten_registration.h"
#include "batch_norm_kernels.h"

#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>

namespace ascend_ops {

const std::vector<std::string>& aten_batch_norm_ops() {
  static const std::vector<std::string> ops = {
      "batch_norm_stats", "batch_norm_gather_stats_with_counts", "batch_norm_elemt",
      "batch_norm_backward_reduce", "batch_norm_backward_elemt"};
  return ops;
}

bool register_aten_batch_norm_cpu(const std::string& op) {
  // Each library object must outlive its registration: kept for the process lifetime.
  static std::map<std::string, std::unique_ptr<torch::Library>> libraries;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (libraries.count(op) != 0) {
    return false;
  }
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                  c10::DispatchKey::CPU, __FILE__, __LINE__);
  if (op == "batch_norm_stats") {
    library->impl(op.c_str(), &batch_norm_stats_cpu);
  } else if (op == "batch_norm_gather_stats_with_counts") {
    library->impl(op.c_str(), &batch_norm_gather_stats_with_counts_cpu);
  } else if (op == "batch_norm_elemt") {
    library->impl(op.c_str(), &batch_norm_elemt_cpu);
  } else if (op == "batch_norm_backward_reduce") {
    library->impl(op.c_str(), &batch_norm_backward_reduce_cpu);
  } else if (op == "batch_norm_backward_elemt") {
    library->impl(op.c_str(), &batch_norm_backward_elemt_cpu);
  } else {
    TORCH_CHECK_VALUE(false, "register_aten_batch_norm_cpu: 'op' must be one of ",
                      c10::Join(", ", aten_batch_norm_ops()), ", got '", op, "'");
  }
  libraries.emplace(op, std::move(library));
  return true;
}

}  // namespace ascend_ops
