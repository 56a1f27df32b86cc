// TEST DOUBLE of the torch_npu and CANN functions the NPU adapter calls (declared by the
// headers under include/ and by op_plugin/csrc/npu/aclnn_prototypes.h). Each records what
// it was called with in `recorded_events()`, in call order; phase 1 of the FLCE forward
// and backward ops (built-in and custom) also records its arguments; in an interpreter,
// RunAclCall records whether the GIL is held. Built with the adapter's kernels by
// tests/npu_link/test_recorded_calls.py, which runs them on CPU tensors.
#include "recorder.h"

#include "aclnn_prototypes.h"
#include "op_plugin/utils/op_api_common_base.h"
#include "torch_npu/csrc/core/npu/NPUException.h"
#include "torch_npu/csrc/core/npu/NPUFormat.h"
#include "torch_npu/csrc/core/npu/NPUFunctions.h"
#include "torch_npu/csrc/framework/OpParamMaker.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

// Python's, when the doubles are loaded into an interpreter (test_recorded_calls.py's
// extension build); null in the stand-alone driver, which links no libpython.
extern "C" int PyGILState_Check(void) __attribute__((weak));

// What an aclTensor made by ConvertType stands for: the tensor itself.
struct aclTensor {
  int id;
  at::Tensor tensor;
};

namespace recorder {

std::vector<std::string>& recorded_events() {
  static std::vector<std::string> events;
  return events;
}

int& next_phase1_status() {
  static int status = 0;
  return status;
}

void record(const std::string& event) { recorded_events().push_back(event); }

int64_t& npu_format() {
  static int64_t format = 2;  // ACL_FORMAT_ND
  return format;
}

namespace {
// In an interpreter, the events are written to $NPU_LINK_RECORD when the library unloads.
struct DumpAtExit {
  // The events first, so that they are destroyed after this dump (statics die in reverse).
  DumpAtExit() { recorded_events(); }
  ~DumpAtExit() {
    const char* path = std::getenv("NPU_LINK_RECORD");
    if (path == nullptr) {
      return;
    }
    std::ofstream out(path);
    for (const std::string& event : recorded_events()) {
      out << event << "\n";
    }
  }
} dump_at_exit;
}  // namespace

}  // namespace recorder

using recorder::record;

namespace {

std::string describe(const aclTensor* t) {
  if (t == nullptr) {
    return "null";
  }
  std::ostringstream out;
  out << "t" << t->id << ":" << c10::toString(t->tensor.scalar_type()) << ":[";
  for (int64_t d = 0; d < t->tensor.dim(); ++d) {
    out << (d ? "," : "") << t->tensor.size(d);
  }
  out << "]" << (t->tensor.is_contiguous() ? ":contiguous" : ":strided");
  return out.str();
}

std::string values(const aclTensor* t) {
  std::ostringstream out;
  const at::Tensor v = t->tensor.to(at::kLong).contiguous();
  for (int64_t i = 0; i < v.numel(); ++i) {
    out << (i ? "," : "") << v.const_data_ptr<int64_t>()[i];
  }
  return out.str();
}

aclnnStatus finish_phase1(uint64_t* workspace_size, aclOpExecutor** executor) {
  *workspace_size = 64;
  *executor = reinterpret_cast<aclOpExecutor*>(0x20);
  return recorder::next_phase1_status();
}

int execute_entry(void*, uint64_t, aclOpExecutor*, aclrtStream) { return 0; }
void init_pta_cache() { record("InitPTACacheThreadLocal"); }
void set_pta_hash_key(uint64_t key) { record("SetPTAHashKey " + std::to_string(key)); }
void set_pta_cache_hash_key(uint8_t* key, size_t size) {
  record(std::string("SetPTACacheHashKey ") + (key == nullptr ? "null" : "set") + " " +
         std::to_string(size));
}
void uninit_pta_cache() { record("UnInitPTACacheThreadLocal"); }

}  // namespace

extern "C" {

aclnnStatus aclnnFusedLinearOnlineMaxSumGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* target,
    int64_t vocabStartIndex, int64_t vocabEndIndex, aclTensor* logitsMaxLocalOut,
    aclTensor* sumExpLogitsLocalOut, aclTensor* predictedLogitsLocalOut,
    aclTensor* targetMaskOut, aclTensor* maskedTargetOut,
    aclTensor* vocabParallelLogitsOutOptional, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  record("phase1 aclnnFusedLinearOnlineMaxSum input=" + describe(input) + " weight=" +
         describe(weight) + " target=" + describe(target) + " target_values=" +
         values(target) + " vocabStartIndex=" + std::to_string(vocabStartIndex) +
         " vocabEndIndex=" + std::to_string(vocabEndIndex) + " targetMaskOut=" +
         describe(targetMaskOut) + " logits=" + describe(vocabParallelLogitsOutOptional));
  (void)logitsMaxLocalOut; (void)sumExpLogitsLocalOut; (void)predictedLogitsLocalOut;
  (void)maskedTargetOut;
  return finish_phase1(workspaceSize, executor);
}

aclnnStatus aclnnFusedLinearCrossEntropyLossGradGetWorkspaceSize(
    const aclTensor* grad, const aclTensor* input, const aclTensor* weight,
    const aclTensor* targetMask, const aclTensor* maskedTarget, float labelSmoothing,
    const aclTensor* logitsMaxOptional, const aclTensor* sumExpLogitsOptional,
    const aclTensor* softmaxOptional, aclTensor* inputGradOut, aclTensor* weightGradOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  record("phase1 aclnnFusedLinearCrossEntropyLossGrad input=" + describe(input) +
         " weight=" + describe(weight) + " targetMask=" + describe(targetMask) +
         " targetMask_values=" + values(targetMask) + " maskedTarget=" + describe(maskedTarget) +
         " maskedTarget_values=" + values(maskedTarget) + " logitsMax=" +
         describe(logitsMaxOptional) + " softmax=" + describe(softmaxOptional));
  (void)grad; (void)labelSmoothing; (void)sumExpLogitsOptional;
  (void)inputGradOut; (void)weightGradOut;
  return finish_phase1(workspaceSize, executor);
}

aclnnStatus aclnnAscendOpsFusedLinearCrossEntropyLossGradGetWorkspaceSize(
    const aclTensor* grad, const aclTensor* input, const aclTensor* weight,
    const aclTensor* targetMask, const aclTensor* maskedTarget,
    const aclTensor* logitsMaxOptional, const aclTensor* sumExpLogitsOptional,
    const aclTensor* softmaxOptional, const aclTensor* biasOptional,
    const aclTensor* classWeightOptional, const aclTensor* alphaOptional,
    const aclTensor* betaOptional, const aclTensor* gammaOptional, double labelSmoothing,
    double logitScale, double softcap, aclTensor* inputGradOut, aclTensor* weightGradOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  record("phase1 aclnnAscendOpsFusedLinearCrossEntropyLossGrad input=" + describe(input) +
         " targetMask=" + describe(targetMask) + " targetMask_values=" + values(targetMask) +
         " maskedTarget_values=" + values(maskedTarget) + " softmax=" + describe(softmaxOptional) +
         " logitsMax=" + describe(logitsMaxOptional) + " bias=" + describe(biasOptional) +
         " classWeight=" + describe(classWeightOptional) + " alpha=" + describe(alphaOptional) +
         " beta=" + describe(betaOptional) + " gamma=" + describe(gammaOptional) +
         " grad=" + describe(grad) + " labelSmoothing=" + std::to_string(labelSmoothing) +
         " logitScale=" + std::to_string(logitScale) + " softcap=" + std::to_string(softcap));
  (void)weight; (void)sumExpLogitsOptional; (void)inputGradOut; (void)weightGradOut;
  return finish_phase1(workspaceSize, executor);
}

}  // extern "C"

void* GetOpApiFuncAddr(const char* name) {
  const std::string n(name);
  if (n == "aclnnFusedLinearOnlineMaxSumGetWorkspaceSize") {
    return reinterpret_cast<void*>(&aclnnFusedLinearOnlineMaxSumGetWorkspaceSize);
  }
  if (n == "aclnnFusedLinearCrossEntropyLossGradGetWorkspaceSize") {
    return reinterpret_cast<void*>(&aclnnFusedLinearCrossEntropyLossGradGetWorkspaceSize);
  }
  if (n == "aclnnAscendOpsFusedLinearCrossEntropyLossGradGetWorkspaceSize") {
    return reinterpret_cast<void*>(&aclnnAscendOpsFusedLinearCrossEntropyLossGradGetWorkspaceSize);
  }
  if (n == "aclnnFusedLinearOnlineMaxSum" || n == "aclnnFusedLinearCrossEntropyLossGrad" ||
      n == "aclnnAscendOpsFusedLinearCrossEntropyLossGrad") {
    return reinterpret_cast<void*>(&execute_entry);
  }
  if (n == "InitPTACacheThreadLocal") return reinterpret_cast<void*>(&init_pta_cache);
  if (n == "SetPTAHashKey") return reinterpret_cast<void*>(&set_pta_hash_key);
  if (n == "SetPTACacheHashKey") return reinterpret_cast<void*>(&set_pta_cache_hash_key);
  if (n == "UnInitPTACacheThreadLocal") return reinterpret_cast<void*>(&uninit_pta_cache);
  return nullptr;
}

aclTensor* ConvertType(const at::Tensor& tensor) {
  if (!tensor.defined()) {
    return nullptr;
  }
  static int next_id = 0;
  auto* t = new aclTensor{next_id++, tensor};
  record("create t" + std::to_string(t->id));
  return t;
}

aclTensor* ConvertType(const std::optional<at::Tensor>& tensor) {
  return tensor.has_value() ? ConvertType(*tensor) : nullptr;
}

void Release(aclTensor* tensor) {
  if (tensor != nullptr) {
    record("destroy t" + std::to_string(tensor->id));
    delete tensor;
  }
}

void InitExecCommonCtx() { record("InitExecCommonCtx"); }
void UnInitExecCommonCtx() { record("UnInitExecCommonCtx"); }
void ReleaseExecCommonCtx() { record("ReleaseExecCommonCtx"); }
aclrtStream GetAclStream() {
  record("GetAclStream");
  return reinterpret_cast<aclrtStream>(0x10);
}
void* GetWorkSpaceAddr(uint64_t size) {
  record("GetWorkSpaceAddr " + std::to_string(size));
  return reinterpret_cast<void*>(0x30);
}
void InitExecSubTheadCtx(aclrtStream) { record("InitExecSubTheadCtx"); }
int ExecuteApiFunc(const void*, aclrtStream, void*, uint64_t, aclOpExecutor*) {
  record("ExecuteApiFunc");
  return 0;
}
void RunAclCall(const std::string& name, const std::function<int()>& func) {
  record("RunAclCall " + name);
  if (PyGILState_Check != nullptr) {  // torch_npu's RunOpApi may release the GIL and throw
    record(std::string("GIL ") + (PyGILState_Check() ? "held" : "released"));
  }
  func();  // the task queue off: run now
}

namespace c10_npu {
const char* c10_npu_get_error_message() { return ""; }
uint32_t GetDeterministicLevel() {
  record("GetDeterministicLevel");
  return 0;
}
}  // namespace c10_npu

namespace at_npu::native {
void ApplyDeterministicLevel(int64_t, bool, bool) { record("ApplyDeterministicLevel"); }
int64_t get_npu_format(const at::Tensor&) { return recorder::npu_format(); }
at::Tensor npu_format_cast(const at::Tensor& tensor, int64_t format) {
  record("npu_format_cast " + std::to_string(format));
  return tensor;
}
}  // namespace at_npu::native
