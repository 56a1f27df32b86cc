// Not CANN's header: our minimal stand-in for what op_host/*_def.cpp uses of CANN's
// register/op_def_registry.h (ge:: status and dtype codes, gert::TilingContext and the
// InferShape/InferDataType contexts, ops::OpDef and OP_ADD), so that the TilingFunc, as
// shipped, compiles on the host against CANN's real Matmul tiling library
// (../shared/tools/cann-matmul-tiling) and runs in the tests (../tiling_func_host.cpp).
// Only the calls our op_host/*_def.cpp files make exist; each behaves as CANN documents it for a
// TilingFunc (a missing optional input reads as nullptr, the raw tiling buffer has a
// capacity, GetWorkspaceSizes(n) hands out n slots). OP_ADD records the op type with its
// TilingFunc and inputs, so the harness calls the very function the OpDef registers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace fe {
class PlatFormInfos;
}

namespace ge {
using graphStatus = uint32_t;
constexpr graphStatus GRAPH_SUCCESS = 0;
constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFF;
enum DataType : int32_t { DT_FLOAT = 0, DT_FLOAT16 = 1, DT_INT8 = 2, DT_INT32 = 3, DT_UINT8 = 4, DT_INT64 = 9,
                          DT_BOOL = 12, DT_BF16 = 27 };
enum Format : int32_t { FORMAT_ND = 2 };
}  // namespace ge

namespace gert {

class Shape {
 public:
  Shape() = default;
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  size_t GetDimNum() const { return dims_.size(); }
  int64_t GetDim(size_t i) const { return i < dims_.size() ? dims_[i] : 0; }
  void SetDimNum(size_t n) { dims_.resize(n); }
  void SetDim(size_t i, int64_t d) { if (i < dims_.size()) dims_[i] = d; }
 private:
  std::vector<int64_t> dims_;
};

class StorageShape {
 public:
  StorageShape() = default;
  explicit StorageShape(Shape s) : shape_(std::move(s)) {}
  const Shape& GetStorageShape() const { return shape_; }
  const Shape& GetOriginShape() const { return shape_; }
 private:
  Shape shape_;
};

class CompileTimeTensorDesc {
 public:
  explicit CompileTimeTensorDesc(ge::DataType dtype = ge::DT_FLOAT) : dtype_(dtype) {}
  ge::DataType GetDataType() const { return dtype_; }
 private:
  ge::DataType dtype_;
};

class RuntimeAttrs {
 public:
  template <typename T>
  const T* GetAttrPointer(size_t i) const {
    static_assert(sizeof(T) <= sizeof(Slot), "attribute too large for the stand-in");
    return i < slots_.size() ? reinterpret_cast<const T*>(slots_[i].bytes) : nullptr;
  }
  template <typename T>
  void Set(size_t i, T v) {
    static_assert(sizeof(T) <= sizeof(Slot), "attribute too large for the stand-in");
    if (slots_.size() <= i) slots_.resize(i + 1);
    *reinterpret_cast<T*>(slots_[i].bytes) = v;
  }
 private:
  struct Slot { alignas(8) unsigned char bytes[8] = {}; };
  std::vector<Slot> slots_;
};

class TilingData {
 public:
  explicit TilingData(size_t capacity) : bytes_(capacity) {}
  void* GetData() { return bytes_.data(); }
  size_t GetCapacity() const { return bytes_.size(); }
  void SetDataSize(size_t size) { size_ = size; }
  size_t GetDataSize() const { return size_; }
 private:
  std::vector<uint8_t> bytes_;
  size_t size_ = 0;
};

// One TilingFunc call's inputs (shapes, dtypes, attributes, the chip) and what it sets.
class TilingContext {
 public:
  // Inputs in OpDef order; an absent optional input has no shape.
  struct Input {
    bool present = false;
    StorageShape shape;
    CompileTimeTensorDesc desc;
  };
  TilingContext(std::vector<Input> inputs, RuntimeAttrs attrs, fe::PlatFormInfos* platform, size_t tilingCapacity)
      : inputs_(std::move(inputs)), attrs_(std::move(attrs)), platform_(platform), raw_(tilingCapacity) {}

  const StorageShape* GetInputShape(size_t i) const { return Present(i) ? &inputs_[i].shape : nullptr; }
  const StorageShape* GetOptionalInputShape(size_t i) const { return GetInputShape(i); }
  const CompileTimeTensorDesc* GetInputDesc(size_t i) const { return Present(i) ? &inputs_[i].desc : nullptr; }
  const CompileTimeTensorDesc* GetOptionalInputDesc(size_t i) const { return GetInputDesc(i); }
  const RuntimeAttrs* GetAttrs() const { return &attrs_; }
  fe::PlatFormInfos* GetPlatformInfo() const { return platform_; }

  ge::graphStatus SetBlockDim(uint32_t n) { blockDim_ = n; return ge::GRAPH_SUCCESS; }
  ge::graphStatus SetScheduleMode(uint32_t m) { scheduleMode_ = m; return ge::GRAPH_SUCCESS; }
  ge::graphStatus SetTilingKey(uint64_t k) { tilingKey_ = k; return ge::GRAPH_SUCCESS; }
  TilingData* GetRawTilingData() { return &raw_; }
  size_t* GetWorkspaceSizes(size_t n) { workspaces_.assign(n, 0); return workspaces_.data(); }

  // What the TilingFunc set (the harness reads these back).
  uint32_t blockDim() const { return blockDim_; }
  uint32_t scheduleMode() const { return scheduleMode_; }
  uint64_t tilingKey() const { return tilingKey_; }
  const TilingData& rawTilingData() const { return raw_; }
  const std::vector<size_t>& workspaceSizes() const { return workspaces_; }

 private:
  bool Present(size_t i) const { return i < inputs_.size() && inputs_[i].present; }
  std::vector<Input> inputs_;
  RuntimeAttrs attrs_;
  fe::PlatFormInfos* platform_;
  TilingData raw_;
  uint32_t blockDim_ = 0, scheduleMode_ = 0;
  uint64_t tilingKey_ = 0;
  std::vector<size_t> workspaces_;
};

class InferShapeContext {
 public:
  const Shape* GetInputShape(size_t i) const { return i < inputs.size() ? &inputs[i] : nullptr; }
  Shape* GetOutputShape(size_t i) { return i < outputs.size() ? &outputs[i] : nullptr; }
  std::vector<Shape> inputs, outputs;
};

class InferDataTypeContext {
 public:
  ge::DataType GetInputDataType(size_t i) const { return i < inputs.size() ? inputs[i] : ge::DT_FLOAT; }
  ge::graphStatus SetOutputDataType(size_t i, ge::DataType t) {
    if (outputs.size() <= i) outputs.resize(i + 1);
    outputs[i] = t;
    return ge::GRAPH_SUCCESS;
  }
  std::vector<ge::DataType> inputs, outputs;
};

}  // namespace gert

namespace ops {

enum Option { REQUIRED = 0, OPTIONAL = 1, DYNAMIC = 2 };

using TilingFunc = ge::graphStatus (*)(gert::TilingContext*);
using InferShapeFunc = ge::graphStatus (*)(gert::InferShapeContext*);
using InferDataTypeFunc = ge::graphStatus (*)(gert::InferDataTypeContext*);

class OpParamDef {
 public:
  explicit OpParamDef(std::string name) : name(std::move(name)) {}
  OpParamDef& ParamType(Option o) { option = o; return *this; }
  OpParamDef& DataType(std::vector<ge::DataType> d) { dtypes = std::move(d); return *this; }
  OpParamDef& Format(std::vector<ge::Format> f) { formats = std::move(f); return *this; }
  std::string name;
  Option option = REQUIRED;
  std::vector<ge::DataType> dtypes;
  std::vector<ge::Format> formats;
};

class OpAttrDef {
 public:
  explicit OpAttrDef(std::string name) : name(std::move(name)) {}
  OpAttrDef& AttrType(Option o) { option = o; return *this; }
  OpAttrDef& Float() { return *this; }  // the type alone: a REQUIRED attribute has no default
  OpAttrDef& Float(float v) { value = v; return *this; }
  OpAttrDef& Bool() { return *this; }
  OpAttrDef& Bool(bool v) { value = v; return *this; }
  std::string name;
  Option option = REQUIRED;
  double value = 0;
};

class OpAICoreDef {
 public:
  OpAICoreDef& SetTiling(TilingFunc f) { tiling = f; return *this; }
  OpAICoreDef& AddConfig(const char* soc) { configs.emplace_back(soc); return *this; }
  TilingFunc tiling = nullptr;
  std::vector<std::string> configs;
};

class OpDef {
 public:
  explicit OpDef(const char* type) : type_(type) {}
  OpParamDef& Input(const char* name) { inputs_.emplace_back(name); return inputs_.back(); }
  OpParamDef& Output(const char* name) { outputs_.emplace_back(name); return outputs_.back(); }
  OpAttrDef& Attr(const char* name) { attrs_.emplace_back(name); return attrs_.back(); }
  OpDef& SetInferShape(InferShapeFunc f) { inferShape_ = f; return *this; }
  OpDef& SetInferDataType(InferDataTypeFunc f) { inferDataType_ = f; return *this; }
  OpAICoreDef& AICore() { return aicore_; }

  const std::string& type() const { return type_; }
  const std::vector<OpParamDef>& inputs() const { return inputs_; }
  const std::vector<OpAttrDef>& attrs() const { return attrs_; }
  const OpAICoreDef& aicore() const { return aicore_; }

 private:
  std::string type_;
  std::vector<OpParamDef> inputs_, outputs_;
  std::vector<OpAttrDef> attrs_;
  InferShapeFunc inferShape_ = nullptr;
  InferDataTypeFunc inferDataType_ = nullptr;
  OpAICoreDef aicore_;
};

// The op types OP_ADD registered, by name.
inline std::map<std::string, std::function<OpDef()>>& OpRegistry() {
  static std::map<std::string, std::function<OpDef()>> registry;
  return registry;
}

struct OpAdd {
  OpAdd(const char* type, std::function<OpDef()> make) { OpRegistry()[type] = std::move(make); }
};

}  // namespace ops

#define OP_ADD(opType) \
  static ::ops::OpAdd g_op_add_##opType(#opType, [] { return ::ops::OpDef(opType(#opType)); })
