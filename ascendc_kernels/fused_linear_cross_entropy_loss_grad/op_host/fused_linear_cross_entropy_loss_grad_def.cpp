// CANN side of AscendOpsFusedLinearCrossEntropyLossGrad: the OpDef, InferShape/
// InferDataType and the TilingFunc wrapper around the plain C++ tiling function. Built
// into the op package by build.sh (ASCEND_HOME_PATH set), and, as it is, on the host
// against CANN's real Matmul tiling library with our TilingContext stand-in
// (../../cann_host: setup.py builds it when ../shared/tools/cann-matmul-tiling is there);
// the tests call this TilingFunc and impl="sim" runs the kernel with its tiling data.
//
// The op type is ours (never CANN's built-in FusedLinearCrossEntropyLossGrad); inputs,
// optionality, the attribute and dtypes are those of aclnnFusedLinearCrossEntropyLossGrad:
// grad f32 [BT]; input/weight f16|bf16 [BT,H]/[V,H]; target_mask uint8 bit-packed;
// masked_target int32|int64 [BT]; label_smoothing; logits_max/sum_exp_logits f32 [BT]
// (memory-saving mode) or softmax f32 [BT,V] (high-performance mode); input_grad and
// weight_grad in input's dtype. Beyond CANN's op, the loss options of SPEC §7 (none of
// them given: the plain op above, bit for bit): optional bias, class_weight f32 [V] and
// alpha, beta, gamma f32 [BT] (the per-row coefficients, which replace grad: all three or
// none), attributes logit_scale (1.0) and softcap (0.0: none). The kernel (the MIX cube + vector kernel of op_kernel/)
// takes the inputs and outputs in this order, then workspace and tiling. The same list
// is in ../../ascend_ops.json (msopgen).
//
// Note on the generated aclnn prototype: CANN generates attributes between the inputs and
// the outputs, so aclnnAscendOpsFusedLinearCrossEntropyLossGradGetWorkspaceSize takes
// labelSmoothing after softmaxOptional, where the built-in takes it after maskedTarget
// (see ../README.md, "One package").
#include <cstring>
#include <string>
#include <vector>

#include "dlog_pub.h"  // CANN's slog (dlog_error): where a TilingFunc says why it refuses
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"  // matmul_tiling::MultiCoreMatmulTiling

#include "fused_linear_cross_entropy_loss_grad_tiling.h"

namespace optiling {

// One Matmul's TCubeTiling from CANN's tiling library: one core, A/B in GM (ND, the input
// dtype, B transposed for the logits, A transposed for Gᵀ·x), C in GM (fp32, or the input
// dtype for high-performance mode's outputs), the block's shape, the request's fixed base
// block (clamped to the problem by FlceMatmulRequests), M-first traversal, and the
// object's L1 budget within the L1 the chip reports.
static bool CannCubeTiling(const platform_ascendc::PlatformAscendC& ascendc, uint64_t chipL1,
                           const ascend_ops_kernels::FlceMatmulRequest& r, bool transA, bool transB,
                           matmul_tiling::DataType dtype, AscendC::tiling::TCubeTiling& out) {
  matmul_tiling::MultiCoreMatmulTiling mm(ascendc);
  if (mm.SetDim(1) != 0) return false;
  mm.SetAType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, dtype, transA);
  mm.SetBType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, dtype, transB);
  mm.SetCType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND,
              r.cInInputDtype ? dtype : matmul_tiling::DataType::DT_FLOAT);
  mm.SetBias(false);
  if (mm.SetShape(r.m, r.n, r.k) != 0 || mm.SetOrgShape(r.m, r.n, r.k) != 0) return false;
  // A refused SetFixSplit or SetBufferSpace would be silently ignored by GetTiling.
  if (mm.SetFixSplit(r.baseM, r.baseN, r.baseK) != 0) return false;
  mm.SetTraverse(matmul_tiling::MatrixTraverse::FIRSTM);
  const uint64_t l1 = r.l1Budget < chipL1 ? r.l1Budget : chipL1;
  if (mm.SetBufferSpace(static_cast<int32_t>(l1), -1, -1) != 0) return false;
  return mm.GetTiling(out) != -1;
}

enum FlceInput : size_t {
  kGrad = 0, kInput, kWeight, kTargetMask, kMaskedTarget, kLogitsMax, kSumExpLogits, kSoftmax,
  kBias, kClassWeight, kAlpha, kBeta, kGamma
};
enum FlceAttr : size_t { kLabelSmoothing = 0, kLogitScale, kSoftcap };

// The loss options of this call as FlceOption bits (0: none), or false when they are
// inconsistent: the coefficients come as a set, and every other option needs them.
static bool FlceOptions(gert::TilingContext* context, uint32_t& options, float& logitScale, float& softcapValue) {
  const auto given = [&](FlceInput i) { return context->GetOptionalInputShape(i) != nullptr; };
  const int coefficients = int(given(kAlpha)) + int(given(kBeta)) + int(given(kGamma));
  const float* scale = context->GetAttrs()->GetAttrPointer<float>(kLogitScale);
  const float* cap = context->GetAttrs()->GetAttrPointer<float>(kSoftcap);
  const bool softcap = cap != nullptr && *cap != 0.0f;
  const bool scaled = scale != nullptr && *scale != 1.0f;
  options = 0;
  logitScale = scale != nullptr ? *scale : 1.0f;
  softcapValue = cap != nullptr ? *cap : 0.0f;
  if (coefficients == 0) return !(given(kBias) || given(kClassWeight) || softcap || scaled);
  if (coefficients != 3) return false;
  options = kFlceOptCoefficients;
  if (given(kBias)) options |= kFlceOptBias;
  if (given(kClassWeight)) options |= kFlceOptClassWeight;
  if (softcap) options |= kFlceOptSoftcap;
  return true;
}

// Every GRAPH_FAILED is logged with its reason first, through CANN's slog as asc-devkit's
// own host tiling reports its errors (PF_LOGE, include/utils/tiling/platform/
// platform_ascendc_log.h:34-37): "refuses this call" for what the caller passed (the shapes,
// the options, what the kernel cannot take), "failed" for what no call should reach.
static ge::graphStatus Refuse(const std::string& why) {
  dlog_error(ASCENDCKERNEL, "AscendOpsFusedLinearCrossEntropyLossGrad refuses this call: %s", why.c_str());
  return ge::GRAPH_FAILED;
}

static ge::graphStatus Fail(const std::string& why) {
  dlog_error(ASCENDCKERNEL, "AscendOpsFusedLinearCrossEntropyLossGrad failed: %s", why.c_str());
  return ge::GRAPH_FAILED;
}

static std::string DimsText(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

static std::vector<int64_t> Dims(const gert::Shape& shape) {
  std::vector<int64_t> dims(shape.GetDimNum());
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = shape.GetDim(i);
  return dims;
}

// "" when input `index` is absent or has exactly the sizes `expected`, else why not, naming
// it: the kernel reads exactly these sizes, so anything else would read out of bounds.
static std::string ShapeError(const gert::TilingContext* context, size_t index, const char* name,
                              const char* symbols, const std::vector<int64_t>& expected) {
  const gert::StorageShape* given = context->GetOptionalInputShape(index);
  if (given == nullptr) return "";
  const std::vector<int64_t> dims = Dims(given->GetStorageShape());
  if (dims == expected) return "";
  return std::string(name) + " must be " + symbols + " = " + DimsText(expected) + ", got " + DimsText(dims);
}

// The inputs' shapes against input [BT, H] and weight [V, H] (aclnnFusedLinearCrossEntropyLossGrad's,
// and the loss options' of SPEC §7); "" when they all fit. The generated aclnn API checks
// dtypes and formats against the OpDef, not shapes: this is the only check between a
// malformed call and the kernel.
static std::string FlceInputShapesError(const gert::TilingContext* context, int64_t& bt, int64_t& h, int64_t& v) {
  const gert::Shape& input = context->GetInputShape(kInput)->GetStorageShape();
  const gert::Shape& weight = context->GetInputShape(kWeight)->GetStorageShape();
  if (input.GetDimNum() != 2 || input.GetDim(0) < 0 || input.GetDim(1) < 0)
    return "input must be 2-D [BT, H], got " + DimsText(Dims(input));
  bt = input.GetDim(0);
  h = input.GetDim(1);
  if (weight.GetDimNum() != 2 || weight.GetDim(0) < 0 || weight.GetDim(1) != h)
    return "weight must be 2-D [V, H] with H = input.size(1) = " + std::to_string(h) + ", got " + DimsText(Dims(weight));
  v = weight.GetDim(0);
  // target_mask: bit i of byte i / 8 is row i's flag, so at least ceil(BT / 8) bytes.
  const gert::Shape& mask = context->GetInputShape(kTargetMask)->GetStorageShape();
  if (mask.GetDimNum() != 1 || mask.GetDim(0) < (bt + 7) / 8)
    return "target_mask must be bit-packed uint8 [n] with n >= ceil(BT / 8) = " + std::to_string((bt + 7) / 8) +
           ", got " + DimsText(Dims(mask));
  const struct { FlceInput index; const char* name; const char* symbols; std::vector<int64_t> dims; } expected[] = {
      {kGrad, "grad", "[BT]", {bt}},
      {kMaskedTarget, "masked_target", "[BT]", {bt}},
      {kLogitsMax, "logits_max", "[BT]", {bt}},
      {kSumExpLogits, "sum_exp_logits", "[BT]", {bt}},
      {kSoftmax, "softmax", "[BT, V]", {bt, v}},
      {kBias, "bias", "[V]", {v}},
      {kClassWeight, "class_weight", "[V]", {v}},
      {kAlpha, "alpha", "[BT]", {bt}},
      {kBeta, "beta", "[BT]", {bt}},
      {kGamma, "gamma", "[BT]", {bt}},
  };
  for (const auto& e : expected) {
    std::string error = ShapeError(context, e.index, e.name, e.symbols, e.dims);
    if (!error.empty()) return error;
  }
  return "";
}

// Deterministic always, so there is no setting to read: CANN's own FLCE TilingFunc (ops-nn
// v9.0.0 op_host/fused_linear_cross_entropy_loss_grad_tiling.cpp) reads none either -- its
// kernels are deterministic by construction (fixed-order sums of per-core partials) -- and
// ours costs nothing to keep so (output-stationary GEMMs, one writer per accumulator tile
// and step: the result does not depend on the schedule, nor on the core count).
static ge::graphStatus FusedLinearCrossEntropyLossGradTilingFunc(gert::TilingContext* context) {
  const float labelSmoothing = *context->GetAttrs()->GetAttrPointer<float>(kLabelSmoothing);
  if (labelSmoothing != 0.0f)  // SPEC §1: only 0.0 is supported
    return Refuse("label_smoothing must be 0.0 (smoothing comes in through gamma), got " +
                  std::to_string(labelSmoothing));
  const bool highPerformance = context->GetOptionalInputShape(kSoftmax) != nullptr;
  const bool logitsMax = context->GetOptionalInputShape(kLogitsMax) != nullptr;
  const bool sumExpLogits = context->GetOptionalInputShape(kSumExpLogits) != nullptr;
  const bool memorySaving = logitsMax && sumExpLogits;
  // Exactly one mode's inputs: softmax alone, or logits_max and sum_exp_logits without it.
  if (highPerformance ? (logitsMax || sumExpLogits) : !memorySaving)
    return Refuse("give softmax alone (high-performance mode) or logits_max and sum_exp_logits without it "
                  "(memory-saving mode)");
  int64_t bt = 0, h = 0, v = 0;
  const std::string shapeError = FlceInputShapesError(context, bt, h, v);
  if (!shapeError.empty()) return Refuse(shapeError);

  ascend_ops_kernels::FusedLinearCrossEntropyLossGradShape shape{};
  shape.bt = static_cast<uint64_t>(bt);
  shape.h = static_cast<uint64_t>(h);
  shape.v = static_cast<uint64_t>(v);
  shape.dtype = context->GetInputDesc(kInput)->GetDataType() == ge::DT_BF16 ? ascend_ops_kernels::kBFloat16
                                                                           : ascend_ops_kernels::kFloat16;
  shape.mode = memorySaving ? ascend_ops_kernels::kMemorySaving : ascend_ops_kernels::kHighPerformance;
  shape.maskPacked = true;  // the op takes the bit-packed uint8 mask only
  shape.target64 = context->GetInputDesc(kMaskedTarget)->GetDataType() == ge::DT_INT64;
  // SPEC §7's options (label smoothing comes in through gamma, not the attribute).
  if (!FlceOptions(context, shape.options, shape.logitScale, shape.softcap))
    return Refuse("the loss options need alpha, beta and gamma together, and bias, class_weight, a logit_scale "
                  "other than 1 or a softcap only with them");

  auto ascendc = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
  uint64_t ub = 0;
  ascendc.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
  ascend_ops_kernels::PlatformFacts platform = ascend_ops_kernels::kAscend910B;
  platform.ubBytes = static_cast<uint32_t>(ub);
  platform.vectorCores = ascendc.GetCoreNumAiv();
  platform.aiCores = ascendc.GetCoreNumAic();
  // The cube buffers the tiling checks its Matmul tilings against, as the chip reports them.
  uint64_t l1 = 0, l0a = 0, l0b = 0, l0c = 0;
  ascendc.GetCoreMemSize(platform_ascendc::CoreMemType::L1, l1);
  ascendc.GetCoreMemSize(platform_ascendc::CoreMemType::L0_A, l0a);
  ascendc.GetCoreMemSize(platform_ascendc::CoreMemType::L0_B, l0b);
  ascendc.GetCoreMemSize(platform_ascendc::CoreMemType::L0_C, l0c);
  platform.l1Bytes = static_cast<uint32_t>(l1);
  platform.l0aBytes = static_cast<uint32_t>(l0a);
  platform.l0bBytes = static_cast<uint32_t>(l0b);
  platform.l0cBytes = static_cast<uint32_t>(l0c);

  // The plain C++ tiling (fused_linear_cross_entropy_loss_grad_tiling.h), the one the
  // simulator runs: the POD tiling data, the tiling key, the cube cores to launch (the
  // MIX kernel's blockDim counts AI cores, each one AIC + 2 AIV) and the user workspace.
  auto tiling = ascend_ops_kernels::TileFusedLinearCrossEntropyLossGrad(shape, platform);
  if (!tiling.error.empty()) return Refuse(tiling.error);
  // BT = 0 or H = 0 gives no block: the adapter zero-fills the outputs without calling the
  // op (op_plugin's FLCE adapter), so a tiling with no block is an error here, never
  // SetBlockDim(0).
  if (tiling.blockDim == 0) return Refuse("BT = 0 or H = 0 has nothing to launch (the caller zero-fills the outputs)");
  // The three Matmul tilings from CANN's library, then checked against the chip's cube
  // buffers (the plain tiling leaves them to this call).
  ascend_ops_kernels::FlceMatmulRequest requests[3];
  ascend_ops_kernels::FlceMatmulRequests(tiling.data, requests);
  const auto dtype = shape.dtype == ascend_ops_kernels::kBFloat16 ? matmul_tiling::DataType::DT_BF16
                                                                  : matmul_tiling::DataType::DT_FLOAT16;
  auto& d = tiling.data;
  if (!CannCubeTiling(ascendc, l1, requests[0], false, true, dtype, d.logitsMm) ||
      !CannCubeTiling(ascendc, l1, requests[1], false, false, dtype, d.inputGradMm) ||
      !CannCubeTiling(ascendc, l1, requests[2], true, false, dtype, d.weightGradMm))
    return Fail("CANN's Matmul tiling refused one of the three requests (its log above says which)");
  const AscendC::tiling::TCubeTiling mms[] = {d.logitsMm, d.inputGradMm, d.weightGradMm};
  const std::string bufferError = ascend_ops_kernels::FlceCubeBufferError(mms, 3, platform);
  if (!bufferError.empty()) return Fail(bufferError);
  const std::string fillError = ascend_ops_kernels::FlceFillError(d.inputGradMm, d.weightGradMm, shape.v, shape.mode);
  if (!fillError.empty()) return Refuse(fillError);
  context->SetBlockDim(tiling.blockDim);
  // Batch mode: the launch holds all its cores before any starts; the cross-core flags
  // and SyncAll would deadlock against another stream's kernel holding some of them.
  context->SetScheduleMode(1);
  context->SetTilingKey(tiling.tilingKey);
  auto* raw = context->GetRawTilingData();
  if (raw->GetCapacity() < sizeof(tiling.data))
    return Fail("the raw tiling buffer holds " + std::to_string(raw->GetCapacity()) + " bytes, the tiling data needs " +
                std::to_string(sizeof(tiling.data)));
  std::memcpy(raw->GetData(), &tiling.data, sizeof(tiling.data));
  raw->SetDataSize(sizeof(tiling.data));
  size_t* workspace = context->GetWorkspaceSizes(1);
  // The Matmul API's system part as the chip reports it, then the kernel's user part
  // (GetUserWorkspace); the simulator reserves kFlceSysWorkspaceBytes for the former.
  workspace[0] = ascendc.GetLibApiWorkSpaceSize() + tiling.data.userWorkspaceBytes;
  return ge::GRAPH_SUCCESS;
}

}  // namespace optiling

namespace ge {

static graphStatus FusedLinearCrossEntropyLossGradInferShape(gert::InferShapeContext* context) {
  *context->GetOutputShape(0) = *context->GetInputShape(1);  // input_grad: input's [BT, H]
  *context->GetOutputShape(1) = *context->GetInputShape(2);  // weight_grad: weight's [V, H]
  return GRAPH_SUCCESS;
}

static graphStatus FusedLinearCrossEntropyLossGradInferDataType(gert::InferDataTypeContext* context) {
  context->SetOutputDataType(0, context->GetInputDataType(1));
  context->SetOutputDataType(1, context->GetInputDataType(1));
  return GRAPH_SUCCESS;
}

}  // namespace ge

namespace ops {

class AscendOpsFusedLinearCrossEntropyLossGrad : public OpDef {
 public:
  explicit AscendOpsFusedLinearCrossEntropyLossGrad(const char* name) : OpDef(name) {
    // 4 combinations: input dtype (f16, bf16) x masked_target dtype (int32, int64).
    const std::vector<ge::DataType> f32(4, ge::DT_FLOAT);
    const std::vector<ge::DataType> half = {ge::DT_FLOAT16, ge::DT_FLOAT16, ge::DT_BF16, ge::DT_BF16};
    const std::vector<ge::DataType> mask(4, ge::DT_UINT8);
    const std::vector<ge::DataType> target = {ge::DT_INT32, ge::DT_INT64, ge::DT_INT32, ge::DT_INT64};
    const std::vector<ge::Format> nd(4, ge::FORMAT_ND);
    this->Input("grad").ParamType(REQUIRED).DataType(f32).Format(nd);
    this->Input("input").ParamType(REQUIRED).DataType(half).Format(nd);
    this->Input("weight").ParamType(REQUIRED).DataType(half).Format(nd);
    this->Input("target_mask").ParamType(REQUIRED).DataType(mask).Format(nd);
    this->Input("masked_target").ParamType(REQUIRED).DataType(target).Format(nd);
    this->Input("logits_max").ParamType(OPTIONAL).DataType(f32).Format(nd);
    this->Input("sum_exp_logits").ParamType(OPTIONAL).DataType(f32).Format(nd);
    this->Input("softmax").ParamType(OPTIONAL).DataType(f32).Format(nd);
    this->Input("bias").ParamType(OPTIONAL).DataType(f32).Format(nd);
    this->Input("class_weight").ParamType(OPTIONAL).DataType(f32).Format(nd);
    this->Input("alpha").ParamType(OPTIONAL).DataType(f32).Format(nd);
    this->Input("beta").ParamType(OPTIONAL).DataType(f32).Format(nd);
    this->Input("gamma").ParamType(OPTIONAL).DataType(f32).Format(nd);
    this->Output("input_grad").ParamType(REQUIRED).DataType(half).Format(nd);
    this->Output("weight_grad").ParamType(REQUIRED).DataType(half).Format(nd);
    this->Attr("label_smoothing").AttrType(OPTIONAL).Float(0.0);
    this->Attr("logit_scale").AttrType(OPTIONAL).Float(1.0);
    this->Attr("softcap").AttrType(OPTIONAL).Float(0.0);
    this->SetInferShape(ge::FusedLinearCrossEntropyLossGradInferShape)
        .SetInferDataType(ge::FusedLinearCrossEntropyLossGradInferDataType);
    this->AICore().SetTiling(optiling::FusedLinearCrossEntropyLossGradTilingFunc);
    this->AICore().AddConfig("ascend910b");
    this->AICore().AddConfig("ascend910_93");
  }
};

OP_ADD(AscendOpsFusedLinearCrossEntropyLossGrad);

}  // namespace ops
