// Both ops' TilingFuncs (op_host/*_def.cpp), compiled as shipped against CANN's own host
// tiling library (asc-devkit v9.0.0, built by ../shared/tools/cann-matmul-tiling) and our
// TilingContext stand-in (include/register/op_def_registry.h), exposed as a C ABI for
// ctypes (python/ascend_ops/sim/cann_tiling.py). setup.py builds it as
// ascend_ops._cann_tiling_funcs when the tool is beside the clone; impl="sim" runs the FLCE
// kernel with the tiling data it returns, and tests/test_cann_tiling.py calls both
// TilingFuncs over shape grids and with malformed inputs.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "cann_tiling_stub.h"
#include "register/op_def_registry.h"
#include "../fused_linear_cross_entropy_loss_grad/op_host/fused_linear_cross_entropy_loss_grad_tiling.h"

extern "C" {

constexpr size_t kCannFlceInputs = 13;  // the FLCE OpDef's inputs
constexpr size_t kCannMaxRank = 4;

// One FLCE TilingFunc call: the op's inputs as a TilingContext would hold them.
struct CannFlceRequest {
  uint64_t bt, h, v;
  uint32_t dtype;           // ascend_ops_kernels::DtypeCode: 1 float16, 2 bfloat16
  uint32_t inputs;          // optional inputs present: 1 logits_max, 2 sum_exp_logits, 4 softmax,
                            // 8 bias, 16 class_weight, 32 alpha, 64 beta, 128 gamma
  int32_t target64;         // masked_target int64 (else int32)
  float labelSmoothing;
  uint32_t aiCores;         // AI cores the chip reports (2 vector cores each); 0: the SoC table's 24
  char soc[32];             // "Ascend910B" (A2) or "Ascend910_93" (A3), as the stub's SoC table names them
  float logitScale;         // the attributes logit_scale (1: none) and softcap (0: none)
  float softcap;
  // Malformed calls: bit i set gives input i (OpDef order) the shape dims[i][:ranks[i]]
  // instead of the one the adapter passes for (bt, h, v).
  uint32_t reshaped;
  uint32_t ranks[kCannFlceInputs];
  int64_t dims[kCannFlceInputs][kCannMaxRank];
};

constexpr size_t kCannBnInputs = 5;  // grad_out, input, mean, invstd, weight
constexpr size_t kCannBnMaxRank = 8;

// One BN TilingFunc call: every input's shape (weight absent when its rank is -1), the
// dtypes (DtypeCode) and the attributes input_g, weight_g, bias_g.
struct CannBnRequest {
  int32_t ranks[kCannBnInputs];
  int64_t dims[kCannBnInputs][kCannBnMaxRank];
  uint32_t dtype, statDtype;
  int32_t inputG, weightG, biasG;
  uint32_t aiCores;
  char soc[32];
};

constexpr size_t kCannTilingCapacity = 4096;  // the raw tiling buffer the context offers

// What a TilingFunc returned and set.
struct CannTilingResult {
  uint32_t status;          // ge::graphStatus: 0 GRAPH_SUCCESS
  uint32_t blockDim, scheduleMode;
  uint32_t workspaceCount;  // how many workspace sizes it asked for
  uint64_t tilingKey, tilingBytes, workspaceBytes;  // workspaceBytes: GetWorkspaceSizes(1)[0]
  uint8_t tiling[kCannTilingCapacity];
  char log[8192];           // the log lines during the call (the tiling library's and the TilingFunc's)
};

}  // extern "C"

namespace {

void AppendLog(int32_t level, const char* line, void* user) {
  std::string& log = *static_cast<std::string*>(user);
  log += (level >= DLOG_ERROR ? "error: " : "warning: ");
  log += line;
  log += '\n';
}

gert::StorageShape ShapeOf(std::vector<int64_t> dims) { return gert::StorageShape(gert::Shape(std::move(dims))); }

ge::DataType GeDtype(uint32_t code) {
  return code == ascend_ops_kernels::kBFloat16 ? ge::DT_BF16
         : code == ascend_ops_kernels::kFloat16 ? ge::DT_FLOAT16
                                                : ge::DT_FLOAT;
}

int Fail(CannTilingResult* out, const std::string& why) {
  std::snprintf(out->log, sizeof(out->log), "%s", why.c_str());
  return 1;
}

// Calls `opType`'s registered TilingFunc with these inputs and attributes on `soc` (with
// `aiCores` AI cores; 0: the table's) and records what it set. Returns 0 when it ran
// (whatever it returned: see out->status), 1 when the request itself is unusable.
int RunTilingFunc(const char* opType, std::vector<gert::TilingContext::Input> inputs, gert::RuntimeAttrs attrs,
                  const char* socName, size_t socBytes, uint32_t aiCores, CannTilingResult* out) {
  std::memset(out, 0, sizeof(*out));
  const auto op = ops::OpRegistry().find(opType);
  if (op == ops::OpRegistry().end()) return Fail(out, std::string(opType) + " is not registered (OP_ADD)");
  const ops::OpDef def = op->second();
  if (inputs.size() != def.inputs().size()) return Fail(out, std::string(opType) + "'s input list changed: update cann_host");
  const std::string soc(socName, strnlen(socName, socBytes));
  fe::PlatFormInfos* table = cann_tiling_stub::PlatformInfos(soc);
  if (table == nullptr) return Fail(out, "unknown SoC '" + soc + "' (the stub's table has Ascend910B and Ascend910_93)");
  fe::PlatFormInfos platform = *table;
  if (aiCores != 0) {  // a chip model with fewer cores: the counts PlatformAscendC reads
    std::map<std::string, std::string> cores = {{"ai_core_cnt", std::to_string(aiCores)},
                                                {"cube_core_cnt", std::to_string(aiCores)},
                                                {"vector_core_cnt", std::to_string(2 * aiCores)}};
    platform.SetPlatformResWithLock("SoCInfo", cores);
    platform.SetCoreNumByCoreType("VectorCore");
  }
  gert::TilingContext context(std::move(inputs), std::move(attrs), &platform, kCannTilingCapacity);
  std::string log;
  cann_tiling_stub::SetLogSink(AppendLog, &log, DLOG_WARN);
  out->status = def.aicore().tiling(&context);
  cann_tiling_stub::SetLogSink(nullptr, nullptr, DLOG_ERROR);
  out->blockDim = context.blockDim();
  out->scheduleMode = context.scheduleMode();
  out->tilingKey = context.tilingKey();
  out->tilingBytes = std::min(context.rawTilingData().GetDataSize(), kCannTilingCapacity);
  std::memcpy(out->tiling, const_cast<gert::TilingData&>(context.rawTilingData()).GetData(), out->tilingBytes);
  out->workspaceCount = static_cast<uint32_t>(context.workspaceSizes().size());
  out->workspaceBytes = context.workspaceSizes().empty() ? 0 : context.workspaceSizes()[0];
  std::snprintf(out->log, sizeof(out->log), "%s", log.c_str());
  return 0;
}

}  // namespace

extern "C" {

// sizeof(FusedLinearCrossEntropyLossGradTilingData) as compiled here, against CANN's
// generated kernel_tiling.h (the Python side checks its ctypes struct against it).
uint64_t cann_flce_tiling_data_size() { return sizeof(FusedLinearCrossEntropyLossGradTilingData); }

// The request and result structs' sizes, for the load-time check of their ctypes twins.
uint64_t cann_flce_request_size() { return sizeof(CannFlceRequest); }
uint64_t cann_bn_request_size() { return sizeof(CannBnRequest); }
uint64_t cann_tiling_result_size() { return sizeof(CannTilingResult); }

// Runs the registered TilingFunc of AscendOpsFusedLinearCrossEntropyLossGrad once.
int cann_flce_tiling(const CannFlceRequest* request, CannTilingResult* out) {
  const CannFlceRequest& r = *request;
  const ge::DataType half = GeDtype(r.dtype);
  const int64_t bt = static_cast<int64_t>(r.bt), h = static_cast<int64_t>(r.h), v = static_cast<int64_t>(r.v);
  // The OpDef's inputs in order: grad, input, weight, target_mask, masked_target,
  // logits_max, sum_exp_logits, softmax, bias, class_weight, alpha, beta, gamma (the
  // shapes the adapter passes).
  std::vector<gert::TilingContext::Input> inputs = {
      {true, ShapeOf({bt}), gert::CompileTimeTensorDesc(ge::DT_FLOAT)},
      {true, ShapeOf({bt, h}), gert::CompileTimeTensorDesc(half)},
      {true, ShapeOf({v, h}), gert::CompileTimeTensorDesc(half)},
      {true, ShapeOf({(bt + 7) / 8}), gert::CompileTimeTensorDesc(ge::DT_UINT8)},
      {true, ShapeOf({bt}), gert::CompileTimeTensorDesc(r.target64 ? ge::DT_INT64 : ge::DT_INT32)},
      {(r.inputs & 1) != 0, ShapeOf({bt}), gert::CompileTimeTensorDesc(ge::DT_FLOAT)},
      {(r.inputs & 2) != 0, ShapeOf({bt}), gert::CompileTimeTensorDesc(ge::DT_FLOAT)},
      {(r.inputs & 4) != 0, ShapeOf({bt, v}), gert::CompileTimeTensorDesc(ge::DT_FLOAT)},
      {(r.inputs & 8) != 0, ShapeOf({v}), gert::CompileTimeTensorDesc(ge::DT_FLOAT)},
      {(r.inputs & 16) != 0, ShapeOf({v}), gert::CompileTimeTensorDesc(ge::DT_FLOAT)},
      {(r.inputs & 32) != 0, ShapeOf({bt}), gert::CompileTimeTensorDesc(ge::DT_FLOAT)},
      {(r.inputs & 64) != 0, ShapeOf({bt}), gert::CompileTimeTensorDesc(ge::DT_FLOAT)},
      {(r.inputs & 128) != 0, ShapeOf({bt}), gert::CompileTimeTensorDesc(ge::DT_FLOAT)},
  };
  for (size_t i = 0; i < kCannFlceInputs; ++i)
    if ((r.reshaped >> i) & 1u)
      inputs[i].shape = ShapeOf(std::vector<int64_t>(r.dims[i], r.dims[i] + std::min<size_t>(r.ranks[i], kCannMaxRank)));
  gert::RuntimeAttrs attrs;
  attrs.Set<float>(0, r.labelSmoothing);
  attrs.Set<float>(1, r.logitScale);
  attrs.Set<float>(2, r.softcap);
  return RunTilingFunc("AscendOpsFusedLinearCrossEntropyLossGrad", std::move(inputs), std::move(attrs), r.soc,
                       sizeof(r.soc), r.aiCores, out);
}

// Runs the registered TilingFunc of AscendOpsBatchNormReduceBackward once.
int cann_bn_tiling(const CannBnRequest* request, CannTilingResult* out) {
  const CannBnRequest& r = *request;
  const ge::DataType data = GeDtype(r.dtype), stat = GeDtype(r.statDtype);
  const ge::DataType dtypes[kCannBnInputs] = {data, data, stat, stat, ge::DT_FLOAT};
  std::vector<gert::TilingContext::Input> inputs(kCannBnInputs);
  for (size_t i = 0; i < kCannBnInputs; ++i) {
    const size_t rank = r.ranks[i] < 0 ? 0 : std::min<size_t>(r.ranks[i], kCannBnMaxRank);
    inputs[i] = {r.ranks[i] >= 0, ShapeOf(std::vector<int64_t>(r.dims[i], r.dims[i] + rank)),
                 gert::CompileTimeTensorDesc(dtypes[i])};
  }
  gert::RuntimeAttrs attrs;
  attrs.Set<bool>(0, r.inputG != 0);
  attrs.Set<bool>(1, r.weightG != 0);
  attrs.Set<bool>(2, r.biasG != 0);
  return RunTilingFunc("AscendOpsBatchNormReduceBackward", std::move(inputs), std::move(attrs), r.soc, sizeof(r.soc),
                       r.aiCores, out);
}

}  // extern "C"
