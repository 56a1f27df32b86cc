// CANN side of the logits-gradient kernel of fused_linear_cross_entropy_loss_grad (built
// only by build.sh with ASCEND_HOME_PATH set; not compiled in this repository's CI).
// The registered op computes G for one chunk of rows, given the chunk's P source
// (softmax rows, or the logits of the chunk's x·wᵀ GEMM). The whole operator is the host
// composition described in ../README.md: per chunk, GEMM -> this op -> two GEMMs.
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"

#include "fused_linear_cross_entropy_loss_grad_tiling.h"

namespace optiling {

static ge::graphStatus FusedLinearCrossEntropyLossGradTilingFunc(gert::TilingContext* context) {
  const auto* attrs = context->GetAttrs();
  const int64_t rowBegin = *attrs->GetAttrPointer<int64_t>(0);
  const gert::Shape& source = context->GetInputShape(1)->GetStorageShape();   // [rows, V]
  const gert::Shape& grad = context->GetInputShape(0)->GetStorageShape();     // [BT]
  const bool memorySaving = context->GetOptionalInputShape(4) != nullptr;
  ascend_ops_kernels::FusedLinearCrossEntropyLossGradShape shape{
      static_cast<uint64_t>(grad.GetDim(0)), 0, static_cast<uint64_t>(source.GetDim(1)),
      context->GetOutputDesc(0)->GetDataType() == ge::DT_BF16 ? ascend_ops_kernels::kBFloat16
                                                             : ascend_ops_kernels::kFloat16,
      memorySaving ? ascend_ops_kernels::kMemorySaving : ascend_ops_kernels::kHighPerformance,
      context->GetInputDesc(2)->GetDataType() == ge::DT_UINT8,
      context->GetInputDesc(3)->GetDataType() == ge::DT_INT64, 0};

  auto ascendc = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
  uint64_t ub = 0;
  ascendc.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
  ascend_ops_kernels::PlatformFacts platform = ascend_ops_kernels::kAscend910B;
  platform.ubBytes = static_cast<uint32_t>(ub);
  platform.vectorCores = ascendc.GetCoreNumAiv();
  platform.aiCores = ascendc.GetCoreNumAic();

  // One chunk: the caller's source holds exactly the chunk's rows.
  ascend_ops_kernels::FusedLinearCrossEntropyLossGradTiling whole =
      ascend_ops_kernels::TileFusedLinearCrossEntropyLossGrad(shape, platform);
  if (!whole.error.empty()) return ge::GRAPH_FAILED;
  whole.chunkRows = static_cast<uint64_t>(source.GetDim(0));
  FusedLinearCrossEntropyLossGradTilingData data = ascend_ops_kernels::TileFlceChunk(shape, whole, 0, platform);
  data.rowBegin = static_cast<uint64_t>(rowBegin);
  data.rows = static_cast<uint64_t>(source.GetDim(0));
  data.tasks = data.rows * data.colTiles;
  data.usedCores = static_cast<uint32_t>(ascend_ops_kernels::Min(platform.vectorCores, data.tasks));

  context->SetBlockDim(data.usedCores);
  context->SetTilingKey(whole.tilingKey);
  auto* raw = context->GetRawTilingData();
  std::memcpy(raw->GetData(), &data, sizeof(data));
  raw->SetDataSize(sizeof(data));
  size_t* workspace = context->GetWorkspaceSizes(1);
  workspace[0] = ascendc.GetLibApiWorkSpaceSize();
  return ge::GRAPH_SUCCESS;
}

}  // namespace optiling

namespace ge {

static graphStatus FusedLinearCrossEntropyLossGradInferShape(gert::InferShapeContext* context) {
  *context->GetOutputShape(0) = *context->GetInputShape(1);  // G has the source's [rows, V]
  return GRAPH_SUCCESS;
}

}  // namespace ge

namespace ops {

class FusedLinearCrossEntropyLossGrad : public OpDef {
 public:
  explicit FusedLinearCrossEntropyLossGrad(const char* name) : OpDef(name) {
    // 8 combinations: G dtype x mask encoding x target dtype (mode follows the optional inputs).
    const std::vector<ge::DataType> f32(8, ge::DT_FLOAT);
    const std::vector<ge::DataType> mask = {ge::DT_UINT8, ge::DT_UINT8, ge::DT_UINT8, ge::DT_UINT8,
                                            ge::DT_BOOL,  ge::DT_BOOL,  ge::DT_BOOL,  ge::DT_BOOL};
    const std::vector<ge::DataType> target = {ge::DT_INT32, ge::DT_INT64, ge::DT_INT32, ge::DT_INT64,
                                              ge::DT_INT32, ge::DT_INT64, ge::DT_INT32, ge::DT_INT64};
    const std::vector<ge::DataType> g = {ge::DT_FLOAT16, ge::DT_FLOAT16, ge::DT_BF16, ge::DT_BF16,
                                         ge::DT_FLOAT16, ge::DT_FLOAT16, ge::DT_BF16, ge::DT_BF16};
    const std::vector<ge::Format> nd(8, ge::FORMAT_ND);
    this->Input("grad").ParamType(REQUIRED).DataType(f32).Format(nd);
    this->Input("source").ParamType(REQUIRED).DataType(f32).Format(nd);
    this->Input("target_mask").ParamType(REQUIRED).DataType(mask).Format(nd);
    this->Input("masked_target").ParamType(REQUIRED).DataType(target).Format(nd);
    this->Input("logits_max").ParamType(OPTIONAL).DataType(f32).Format(nd);
    this->Input("sum_exp_logits").ParamType(OPTIONAL).DataType(f32).Format(nd);
    this->Output("grad_logits").ParamType(REQUIRED).DataType(g).Format(nd);
    this->Attr("row_begin").AttrType(OPTIONAL).Int(0);
    this->SetInferShape(ge::FusedLinearCrossEntropyLossGradInferShape);
    this->AICore().SetTiling(optiling::FusedLinearCrossEntropyLossGradTilingFunc);
    this->AICore().AddConfig("ascend910b");
    this->AICore().AddConfig("ascend910_93");
  }
};

OP_ADD(FusedLinearCrossEntropyLossGrad);

}  // namespace ops
