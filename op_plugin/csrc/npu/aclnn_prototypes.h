// The aclnn functions the NPU adapter calls, declared here with the prototypes CANN
// publishes for them (the API reference of each op), and a call that the compiler checks
// against them.
//
// The entry points are looked up by name at run time (GetOpApiFuncAddr), so nothing
// links against these declarations: they exist so that `typed_call<decltype(fn)>`
// makes the compiler check every call's arity and argument types, exactly. A swapped
// float and bool, a missing tensor or an extra argument is a compile error
// (tests/npu_link/test_prototypes.py compiles such calls and expects them to fail).
//
// Self-contained on purpose (no CANN or torch_npu header): the declarations of the
// opaque ACL types below match CANN's (acl_base.h, aclnn/acl_meta.h), so this header may
// be included before or after them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

typedef struct aclTensor aclTensor;
typedef struct aclOpExecutor aclOpExecutor;
typedef void* aclrtStream;
typedef int32_t aclnnStatus;

extern "C" {

// --- fused_linear_cross_entropy_loss_grad (SPEC §1) --------------------------------
// CANN's built-in; logitsMax / sumExpLogits for memory-saving mode, softmax for
// high-performance mode (the other pair null).
aclnnStatus aclnnFusedLinearCrossEntropyLossGradGetWorkspaceSize(
    const aclTensor* grad, const aclTensor* input, const aclTensor* weight,
    const aclTensor* targetMask, const aclTensor* maskedTarget, float labelSmoothing,
    const aclTensor* logitsMaxOptional, const aclTensor* sumExpLogitsOptional,
    const aclTensor* softmaxOptional, aclTensor* inputGradOut, aclTensor* weightGradOut,
    uint64_t* workspaceSize, aclOpExecutor** executor);
aclnnStatus aclnnFusedLinearCrossEntropyLossGrad(void* workspace, uint64_t workspaceSize,
                                                 aclOpExecutor* executor, aclrtStream stream);

// Our custom op package (ascendc_kernels/, vendor "ascend_ops"): the same arguments.
aclnnStatus aclnnAscendOpsFusedLinearCrossEntropyLossGradGetWorkspaceSize(
    const aclTensor* grad, const aclTensor* input, const aclTensor* weight,
    const aclTensor* targetMask, const aclTensor* maskedTarget, float labelSmoothing,
    const aclTensor* logitsMaxOptional, const aclTensor* sumExpLogitsOptional,
    const aclTensor* softmaxOptional, aclTensor* inputGradOut, aclTensor* weightGradOut,
    uint64_t* workspaceSize, aclOpExecutor** executor);
aclnnStatus aclnnAscendOpsFusedLinearCrossEntropyLossGrad(void* workspace,
                                                          uint64_t workspaceSize,
                                                          aclOpExecutor* executor,
                                                          aclrtStream stream);

// --- batch_norm_reduce_backward (SPEC §2) --------------------------------------------
// Each output may be null when its flag is false.
aclnnStatus aclnnBatchNormReduceBackwardGetWorkspaceSize(
    const aclTensor* gradOut, const aclTensor* input, const aclTensor* mean,
    const aclTensor* invstd, const aclTensor* weightOptional, bool inputG, bool weightG,
    bool biasG, aclTensor* sumDyOut, aclTensor* sumDyXmuOut, aclTensor* gradWeightOut,
    aclTensor* gradBiasOut, uint64_t* workspaceSize, aclOpExecutor** executor);
aclnnStatus aclnnBatchNormReduceBackward(void* workspace, uint64_t workspaceSize,
                                         aclOpExecutor* executor, aclrtStream stream);

aclnnStatus aclnnAscendOpsBatchNormReduceBackwardGetWorkspaceSize(
    const aclTensor* gradOut, const aclTensor* input, const aclTensor* mean,
    const aclTensor* invstd, const aclTensor* weightOptional, bool inputG, bool weightG,
    bool biasG, aclTensor* sumDyOut, aclTensor* sumDyXmuOut, aclTensor* gradWeightOut,
    aclTensor* gradBiasOut, uint64_t* workspaceSize, aclOpExecutor** executor);
aclnnStatus aclnnAscendOpsBatchNormReduceBackward(void* workspace, uint64_t workspaceSize,
                                                  aclOpExecutor* executor,
                                                  aclrtStream stream);

// --- the forward companions (SPEC §3), CANN's built-ins only -------------------------
// vocabEndIndex is INCLUSIVE here (a row is masked when target > vocabEndIndex); ours is
// exclusive: the adapter passes end - 1. vocabParallelLogitsOutOptional null selects the
// memory-saving branch.
aclnnStatus aclnnFusedLinearOnlineMaxSumGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* target,
    int64_t vocabStartIndex, int64_t vocabEndIndex, aclTensor* logitsMaxLocalOut,
    aclTensor* sumExpLogitsLocalOut, aclTensor* predictedLogitsLocalOut,
    aclTensor* targetMaskOut, aclTensor* maskedTargetOut,
    aclTensor* vocabParallelLogitsOutOptional, uint64_t* workspaceSize,
    aclOpExecutor** executor);
aclnnStatus aclnnFusedLinearOnlineMaxSum(void* workspace, uint64_t workspaceSize,
                                         aclOpExecutor* executor, aclrtStream stream);

aclnnStatus aclnnFusedCrossEntropyLossWithMaxSumGetWorkspaceSize(
    const aclTensor* logitsMax, const aclTensor* sumExpLogits,
    const aclTensor* predictedLogits, float labelSmoothing, const aclTensor* inputOptional,
    const aclTensor* weightOptional, const aclTensor* vocabParallelLogitsOptional,
    aclTensor* lossOut, aclTensor* softMaxOutOptional, uint64_t* workspaceSize,
    aclOpExecutor** executor);
aclnnStatus aclnnFusedCrossEntropyLossWithMaxSum(void* workspace, uint64_t workspaceSize,
                                                 aclOpExecutor* executor, aclrtStream stream);

}  // extern "C"

namespace ascend_ops::npu {

// Phase 1 of each operator, as a function type. The custom package's entry points are
// the built-in's (the agreed contract), so one kernel serves both.
using FlceGradPhase1 = decltype(aclnnFusedLinearCrossEntropyLossGradGetWorkspaceSize);
using BnReducePhase1 = decltype(aclnnBatchNormReduceBackwardGetWorkspaceSize);
using OnlineMaxSumPhase1 = decltype(aclnnFusedLinearOnlineMaxSumGetWorkspaceSize);
using LossWithMaxSumPhase1 = decltype(aclnnFusedCrossEntropyLossWithMaxSumGetWorkspaceSize);
using Phase2 = decltype(aclnnFusedLinearCrossEntropyLossGrad);

static_assert(std::is_same_v<FlceGradPhase1,
                             decltype(aclnnAscendOpsFusedLinearCrossEntropyLossGradGetWorkspaceSize)>);
static_assert(std::is_same_v<BnReducePhase1,
                             decltype(aclnnAscendOpsBatchNormReduceBackwardGetWorkspaceSize)>);
static_assert(std::is_same_v<Phase2, decltype(aclnnBatchNormReduceBackward)> &&
              std::is_same_v<Phase2, decltype(aclnnAscendOpsFusedLinearCrossEntropyLossGrad)> &&
              std::is_same_v<Phase2, decltype(aclnnAscendOpsBatchNormReduceBackward)> &&
              std::is_same_v<Phase2, decltype(aclnnFusedLinearOnlineMaxSum)> &&
              std::is_same_v<Phase2, decltype(aclnnFusedCrossEntropyLossWithMaxSum)>);

namespace detail {

// Whether an argument of type `Arg` may be passed for a parameter of type `Param`
// without any conversion beyond adding const to a pointee: the exact type, `T*` for
// `const T*`, or nullptr for any pointer. Stricter than the language (which would turn
// a bool into a float, or a double into an int64_t, silently).
template <typename Param, typename Arg>
constexpr bool passes_exactly() {
  using A = std::remove_cv_t<std::remove_reference_t<Arg>>;
  if constexpr (std::is_same_v<Param, A>) {
    return true;
  } else if constexpr (std::is_pointer_v<Param> && std::is_same_v<A, std::nullptr_t>) {
    return true;
  } else if constexpr (std::is_pointer_v<Param> && std::is_pointer_v<A>) {
    using P = std::remove_pointer_t<Param>;
    using Q = std::remove_pointer_t<A>;
    return std::is_const_v<P> && std::is_same_v<std::remove_const_t<P>, Q>;
  } else {
    return false;
  }
}

template <typename Fn>
struct Prototype;

template <typename R, typename... Params>
struct Prototype<R(Params...)> {
  template <typename... Args>
  static R call(void* address, Args&&... args) {
    static_assert(sizeof...(Args) == sizeof...(Params),
                  "aclnn call: wrong number of arguments for the declared prototype");
    static_assert((passes_exactly<Params, Args>() && ...),
                  "aclnn call: an argument's type differs from the declared prototype's");
    return reinterpret_cast<R (*)(Params...)>(address)(std::forward<Args>(args)...);
  }
};

}  // namespace detail

// Calls the function at `address` as the declared prototype `Fn` (e.g. FlceGradPhase1)
// after checking at compile time that `args` match its parameters one by one.
template <typename Fn, typename... Args>
auto typed_call(void* address, Args&&... args) {
  return detail::Prototype<Fn>::call(address, std::forward<Args>(args)...);
}

}  // namespace ascend_ops::npu
