// CANN side of batch_norm_reduce_backward (built only by build.sh with ASCEND_HOME_PATH
// set; nothing here is compiled in this repository's CI): the OpDef, InferShape and the
// TilingFunc wrapper around the pure tiling function.
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"

#include "batch_norm_reduce_backward_tiling.h"

namespace optiling {

static uint32_t DtypeCode(ge::DataType dtype) {
  return dtype == ge::DT_FLOAT ? ascend_ops_kernels::kFloat32
         : dtype == ge::DT_FLOAT16 ? ascend_ops_kernels::kFloat16
                                   : ascend_ops_kernels::kBFloat16;
}

static ge::graphStatus BatchNormReduceBackwardTilingFunc(gert::TilingContext* context) {
  const gert::Shape& shape = context->GetInputShape(1)->GetStorageShape();  // input [N, C, *]
  uint64_t s = 1;
  for (size_t i = 2; i < shape.GetDimNum(); ++i) s *= shape.GetDim(i);
  const auto* attrs = context->GetAttrs();
  ascend_ops_kernels::BatchNormReduceBackwardShape op{
      static_cast<uint64_t>(shape.GetDim(0)), static_cast<uint64_t>(shape.GetDim(1)), s,
      DtypeCode(context->GetInputDesc(1)->GetDataType()),
      context->GetOutputDesc(0)->GetDataType() == ge::DT_FLOAT16, *attrs->GetAttrPointer<bool>(0),
      *attrs->GetAttrPointer<bool>(1), *attrs->GetAttrPointer<bool>(2)};

  auto ascendc = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
  uint64_t ub = 0;
  ascendc.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
  ascend_ops_kernels::PlatformFacts platform = ascend_ops_kernels::kAscend910B;
  platform.ubBytes = static_cast<uint32_t>(ub);
  platform.vectorCores = ascendc.GetCoreNumAiv();
  platform.aiCores = ascendc.GetCoreNumAic();

  const auto tiling = ascend_ops_kernels::TileBatchNormReduceBackward(op, platform);
  if (!tiling.error.empty()) return ge::GRAPH_FAILED;
  context->SetBlockDim(tiling.blockDim);
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

static graphStatus BatchNormReduceBackwardInferShape(gert::InferShapeContext* context) {
  const gert::Shape* input = context->GetInputShape(1);
  for (size_t i = 0; i < 4; ++i) {
    gert::Shape* out = context->GetOutputShape(i);
    out->SetDimNum(1);
    out->SetDim(0, input->GetDim(1));
  }
  return GRAPH_SUCCESS;
}

}  // namespace ge

namespace ops {

class BatchNormReduceBackward : public OpDef {
 public:
  explicit BatchNormReduceBackward(const char* name) : OpDef(name) {
    // grad_out, input: f32/f16/bf16; mean, invstd: f32 (the aclnn layer casts them).
    const std::vector<ge::DataType> data = {ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16};
    const std::vector<ge::DataType> stat = {ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT};
    const std::vector<ge::DataType> sums = {ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT16};
    const std::vector<ge::Format> nd(4, ge::FORMAT_ND);
    this->Input("grad_out").ParamType(REQUIRED).DataType(data).Format(nd);
    this->Input("input").ParamType(REQUIRED).DataType(data).Format(nd);
    this->Input("mean").ParamType(REQUIRED).DataType(stat).Format(nd);
    this->Input("invstd").ParamType(REQUIRED).DataType(stat).Format(nd);
    this->Input("weight").ParamType(OPTIONAL).DataType(stat).Format(nd);
    this->Output("sum_dy").ParamType(REQUIRED).DataType(sums).Format(nd);
    this->Output("sum_dy_xmu").ParamType(REQUIRED).DataType(sums).Format(nd);
    this->Output("grad_weight").ParamType(REQUIRED).DataType(sums).Format(nd);
    this->Output("grad_bias").ParamType(REQUIRED).DataType(sums).Format(nd);
    this->Attr("input_g").Bool();
    this->Attr("weight_g").Bool();
    this->Attr("bias_g").Bool();
    this->SetInferShape(ge::BatchNormReduceBackwardInferShape);
    this->AICore().SetTiling(optiling::BatchNormReduceBackwardTilingFunc);
    this->AICore().AddConfig("ascend910b");
    this->AICore().AddConfig("ascend910_93");
  }
};

OP_ADD(BatchNormReduceBackward);

}  // namespace ops
