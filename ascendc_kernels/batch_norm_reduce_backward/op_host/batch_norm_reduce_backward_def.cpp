// CANN side of AscendOpsBatchNormReduceBackward: the OpDef, InferShape/InferDataType and
// the TilingFunc wrapper around the pure tiling function. Built into the op package by
// build.sh (ASCEND_HOME_PATH set), compiled from the packaged tree in CI
// (scripts/check_op_package.sh), and run on the host through our TilingContext stand-in
// (../../cann_host; tests/test_cann_tiling.py).
//
// The op type is ours (never CANN's built-in BatchNormReduceBackward); its arguments,
// optionality and dtypes are those of aclnnBatchNormReduceBackward, so the generated
// aclnnAscendOpsBatchNormReduceBackwardGetWorkspaceSize(gradOut, input, mean, invstd,
// weightOptional, inputG, weightG, biasG, sumDyOutOptional, sumDyXmuOutOptional,
// gradWeightOutOptional, gradBiasOutOptional, workspaceSize, executor) takes what the
// built-in one takes (aclnn puts attributes between inputs and outputs). An output whose
// flag is false may be null. The same list is in ../../ascend_ops.json (msopgen).
#include <cstring>
#include <string>
#include <vector>

#include "dlog_pub.h"  // CANN's slog (dlog_error): where a TilingFunc says why it refuses
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"

#include "batch_norm_reduce_backward_tiling.h"

namespace optiling {

static uint32_t DtypeCode(ge::DataType dtype) {
  return dtype == ge::DT_FLOAT ? ascend_ops_kernels::kFloat32
         : dtype == ge::DT_FLOAT16 ? ascend_ops_kernels::kFloat16
                                   : ascend_ops_kernels::kBFloat16;
}

enum BnInput : size_t { kGradOut = 0, kInput, kMean, kInvstd, kWeight };

// Every GRAPH_FAILED is logged with its reason first, through CANN's slog as asc-devkit's
// own host tiling reports its errors (PF_LOGE, include/utils/tiling/platform/platform_ascendc_log.h:34-37).
static ge::graphStatus Refuse(const std::string& why) {
  dlog_error(ASCENDCKERNEL, "AscendOpsBatchNormReduceBackward refuses this call: %s", why.c_str());
  return ge::GRAPH_FAILED;
}

static std::vector<int64_t> Dims(const gert::Shape& shape) {
  std::vector<int64_t> dims(shape.GetDimNum());
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = shape.GetDim(i);
  return dims;
}

static std::string DimsText(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

// The inputs' shapes against input [N, C, *] (aclnnBatchNormReduceBackward's): grad_out
// the same, mean, invstd and weight (when given) [C]; "" when they fit. The generated aclnn
// API checks dtypes and formats against the OpDef, not shapes: this is the only check
// between a malformed call and the kernel, which reads C statistics and N·C·S elements.
static std::string BnInputShapesError(const gert::TilingContext* context) {
  const std::vector<int64_t> input = Dims(context->GetInputShape(kInput)->GetStorageShape());
  if (input.size() < 2) return "input must be [N, C, *] (at least 2-D), got " + DimsText(input);
  for (int64_t d : input)
    if (d < 0) return "input's sizes must be >= 0, got " + DimsText(input);
  const std::vector<int64_t> gradOut = Dims(context->GetInputShape(kGradOut)->GetStorageShape());
  if (gradOut != input) return "grad_out must have input's shape " + DimsText(input) + ", got " + DimsText(gradOut);
  const std::vector<int64_t> c = {input[1]};
  const struct { BnInput index; const char* name; } perChannel[] = {{kMean, "mean"}, {kInvstd, "invstd"},
                                                                     {kWeight, "weight"}};
  for (const auto& p : perChannel) {
    const gert::StorageShape* given = context->GetOptionalInputShape(p.index);  // weight may be absent
    if (given != nullptr && Dims(given->GetStorageShape()) != c)
      return std::string(p.name) + " must be [C] = " + DimsText(c) + " (input.size(1)), got " +
             DimsText(Dims(given->GetStorageShape()));
  }
  return "";
}

static ge::graphStatus BatchNormReduceBackwardTilingFunc(gert::TilingContext* context) {
  const std::string shapeError = BnInputShapesError(context);
  if (!shapeError.empty()) return Refuse(shapeError);
  const gert::Shape& shape = context->GetInputShape(kInput)->GetStorageShape();  // input [N, C, *]
  uint64_t s = 1;
  for (size_t i = 2; i < shape.GetDimNum(); ++i) s *= shape.GetDim(i);
  const auto* attrs = context->GetAttrs();
  // mean and invstd share one dtype (the OpDef's combinations); the kernel reads it as is.
  const uint32_t statDtype = DtypeCode(context->GetInputDesc(kMean)->GetDataType());
  if (DtypeCode(context->GetInputDesc(kInvstd)->GetDataType()) != statDtype)
    return Refuse("mean and invstd must share one dtype");
  ascend_ops_kernels::BatchNormReduceBackwardShape op{
      static_cast<uint64_t>(shape.GetDim(0)), static_cast<uint64_t>(shape.GetDim(1)), s,
      DtypeCode(context->GetInputDesc(kInput)->GetDataType()), statDtype, *attrs->GetAttrPointer<bool>(0),
      *attrs->GetAttrPointer<bool>(1), *attrs->GetAttrPointer<bool>(2)};

  auto ascendc = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
  uint64_t ub = 0;
  ascendc.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
  ascend_ops_kernels::PlatformFacts platform = ascend_ops_kernels::kAscend910B;
  platform.ubBytes = static_cast<uint32_t>(ub);
  platform.vectorCores = ascendc.GetCoreNumAiv();
  platform.aiCores = ascendc.GetCoreNumAic();

  const auto tiling = ascend_ops_kernels::TileBatchNormReduceBackward(op, platform);
  if (!tiling.error.empty()) return Refuse(tiling.error);
  if (tiling.blockDim == 0) return Refuse("no block to launch");  // never SetBlockDim(0)
  context->SetBlockDim(tiling.blockDim);
  // Batch mode: all blocks resident before any runs (SyncAll waits for every one of them).
  context->SetScheduleMode(1);
  context->SetTilingKey(tiling.tilingKey);
  auto* raw = context->GetRawTilingData();
  std::memcpy(raw->GetData(), &tiling.data, sizeof(tiling.data));
  raw->SetDataSize(sizeof(tiling.data));
  size_t* workspace = context->GetWorkspaceSizes(1);
  workspace[0] = ascendc.GetLibApiWorkSpaceSize() + tiling.workspaceBytes;
  return ge::GRAPH_SUCCESS;
}

}  // namespace optiling

namespace ge {

// Each output present is [C]; one not asked for may be absent.
static graphStatus BatchNormReduceBackwardInferShape(gert::InferShapeContext* context) {
  const gert::Shape* input = context->GetInputShape(1);
  for (size_t i = 0; i < 4; ++i) {
    gert::Shape* out = context->GetOutputShape(i);
    if (out == nullptr) continue;
    out->SetDimNum(1);
    out->SetDim(0, input->GetDim(1));
  }
  return GRAPH_SUCCESS;
}

// float16 sums when input and mean are float16, float32 otherwise (torch_npu's rule).
static graphStatus BatchNormReduceBackwardInferDataType(gert::InferDataTypeContext* context) {
  const bool half = context->GetInputDataType(1) == DT_FLOAT16 && context->GetInputDataType(2) == DT_FLOAT16;
  for (size_t i = 0; i < 4; ++i) context->SetOutputDataType(i, half ? DT_FLOAT16 : DT_FLOAT);
  return GRAPH_SUCCESS;
}

}  // namespace ge

namespace ops {

class AscendOpsBatchNormReduceBackward : public OpDef {
 public:
  explicit AscendOpsBatchNormReduceBackward(const char* name) : OpDef(name) {
    // 27 combinations, in ascend_ops.json's order: input dtype (grad_out = input), then
    // the statistics' (mean = invstd), then weight's, each of float32/float16/bfloat16;
    // the sums are float16 only for float16 input and statistics.
    const ge::DataType kinds[3] = {ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16};
    std::vector<ge::DataType> data, stat, weight, sums;
    for (ge::DataType in : kinds)
      for (ge::DataType st : kinds)
        for (ge::DataType w : kinds) {
          data.push_back(in);
          stat.push_back(st);
          weight.push_back(w);
          sums.push_back(in == ge::DT_FLOAT16 && st == ge::DT_FLOAT16 ? ge::DT_FLOAT16 : ge::DT_FLOAT);
        }
    const std::vector<ge::Format> nd(data.size(), ge::FORMAT_ND);
    this->Input("grad_out").ParamType(REQUIRED).DataType(data).Format(nd);
    this->Input("input").ParamType(REQUIRED).DataType(data).Format(nd);
    this->Input("mean").ParamType(REQUIRED).DataType(stat).Format(nd);
    this->Input("invstd").ParamType(REQUIRED).DataType(stat).Format(nd);
    this->Input("weight").ParamType(OPTIONAL).DataType(weight).Format(nd);
    this->Output("sum_dy").ParamType(OPTIONAL).DataType(sums).Format(nd);
    this->Output("sum_dy_xmu").ParamType(OPTIONAL).DataType(sums).Format(nd);
    this->Output("grad_weight").ParamType(OPTIONAL).DataType(sums).Format(nd);
    this->Output("grad_bias").ParamType(OPTIONAL).DataType(sums).Format(nd);
    this->Attr("input_g").Bool();
    this->Attr("weight_g").Bool();
    this->Attr("bias_g").Bool();
    this->SetInferShape(ge::BatchNormReduceBackwardInferShape).SetInferDataType(ge::BatchNormReduceBackwardInferDataType);
    this->AICore().SetTiling(optiling::BatchNormReduceBackwardTilingFunc);
    this->AICore().AddConfig("ascend910b");
    this->AICore().AddConfig("ascend910_93");
  }
};

OP_ADD(AscendOpsBatchNormReduceBackward);

}  // namespace ops
