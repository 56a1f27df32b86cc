// The vector instructions the kernels use. Every operand is checked: 32-byte aligned UB
// address, `count` within its size, owned by the vector pipe, ordered after the other
// pipes' accesses; a source may be the destination itself or disjoint from it, never a
// partial overlap. Arithmetic takes half or float (A2/A3 have no bfloat16_t arithmetic)
// and is done in float, rounded once per instruction, like the hardware's per-element
// IEEE operations.
#pragma once

#include <cmath>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "sim_copy.h"

namespace sim {

template <typename T>
void CountVector(int64_t count) {
  BlockCounters& c = Ctx().counters;
  c.vector_instructions += 1;
  const uint32_t per_repeat = Ctx().launch->soc->repeatBytes / sizeof(T);
  c.vector_repeats += (count + per_repeat - 1) / per_repeat;
}

inline void CheckCount(int64_t count) {
  if (count <= 0) Fail("count must be positive, got " + std::to_string(count));
}

template <typename T>
void Operand(const AscendC::LocalTensor<T>& t, int64_t count, Access access, const char* what) {
  CheckUbAligned(t, what);
  t.Check(0, count, Owner::Vector, access, Ctx().call);
}

template <typename T>
float Widen(T v) { return static_cast<float>(v); }

template <typename T>
const char* TypeName() {
  if (std::is_same<T, float>::value) return "float";
  if (std::is_same<T, half>::value) return "half";
  if (std::is_same<T, bfloat16_t>::value) return "bfloat16_t";
  if (std::is_same<T, double>::value) return "double";
  if (std::is_same<T, int32_t>::value) return "int32_t";
  return "another type";
}

// A2/A3's Add/Sub/Mul/Adds/Muls/Exp take half or float: bfloat16_t data is Cast to float first.
template <typename T>
void CheckArithmeticType() {
  if (!std::is_same<T, half>::value && !std::is_same<T, float>::value)
    Fail(std::string(TypeName<T>()) + " operands: this instruction takes half or float on A2/A3 (Cast to float first)");
}

// The scalar of Adds/Muls has the tensor's element type (the documented prototypes take
// `const T&`, or U with PrimT<T> == U): a double literal on a float tensor does not compile
// on CANN, where the simulator's template would silently convert it.
template <typename T, typename U>
void CheckScalarType() {
  if (!std::is_same<T, U>::value)
    Fail(std::string("scalarValue is ") + TypeName<U>() + " on a " + TypeName<T>() +
         " tensor: it must have the tensor's element type (write 2.0f, not 2.0)");
}

// Documented address-overlap rule: a source and the destination are the same tensor
// (100% overlap) or disjoint.
template <typename T, typename U>
void CheckOverlap(const AscendC::LocalTensor<T>& dst, int64_t dst_count, const AscendC::LocalTensor<U>& src,
                  int64_t src_count, const char* src_name) {
  const auto* d = reinterpret_cast<const uint8_t*>(dst.Raw());
  const auto* x = reinterpret_cast<const uint8_t*>(src.Raw());
  const uint64_t db = dst_count * sizeof(T), xb = src_count * sizeof(U);
  const bool overlap = d < x + xb && x < d + db;
  if (overlap && !(d == x && db == xb)) {
    const uint8_t* ub = Ctx().ub.data();
    Fail(std::string("dst (UB bytes [") + std::to_string(d - ub) + ", " + std::to_string(d - ub + db) + ")) and " +
         src_name + " ([" + std::to_string(x - ub) + ", " + std::to_string(x - ub + xb) +
         ")) partially overlap: a source must be the destination itself or disjoint from it");
  }
}

template <typename T, typename F>
void Binary(const char* call, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& a,
            const AscendC::LocalTensor<T>& b, int32_t count, F f) {
  CallScope scope(call);
  VectorInstruction instruction;
  CheckCount(count);
  CheckArithmeticType<T>();
  Operand(a, count, Access::Read, "src0");
  Operand(b, count, Access::Read, "src1");
  Operand(dst, count, Access::Write, "dst");
  CheckOverlap(dst, count, a, count, "src0");
  CheckOverlap(dst, count, b, count, "src1");
  T* d = dst.Raw(); const T* x = a.Raw(); const T* y = b.Raw();
  for (int32_t i = 0; i < count; ++i) d[i] = T(f(Widen(x[i]), Widen(y[i])));
  CountVector<T>(count);
}

template <typename T, typename F>
void Unary(const char* call, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& a, int32_t count, F f) {
  CallScope scope(call);
  VectorInstruction instruction;
  CheckCount(count);
  CheckArithmeticType<T>();
  Operand(a, count, Access::Read, "src");
  Operand(dst, count, Access::Write, "dst");
  CheckOverlap(dst, count, a, count, "src");
  T* d = dst.Raw(); const T* x = a.Raw();
  for (int32_t i = 0; i < count; ++i) d[i] = T(f(Widen(x[i])));
  CountVector<T>(count);
}

}  // namespace sim

namespace AscendC {

template <typename T>
void Add(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count) {
  sim::Binary("Add", dst, src0, src1, count, [](float x, float y) { return x + y; });
}
template <typename T>
void Sub(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count) {
  sim::Binary("Sub", dst, src0, src1, count, [](float x, float y) { return x - y; });
}
template <typename T>
void Mul(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count) {
  sim::Binary("Mul", dst, src0, src1, count, [](float x, float y) { return x * y; });
}
template <typename T>
void Div(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count) {
  sim::Binary("Div", dst, src0, src1, count, [](float x, float y) { return x / y; });
}
template <typename T, typename U>
void Adds(const LocalTensor<T>& dst, const LocalTensor<T>& src, const U& scalarValue, const int32_t& count) {
  {
    sim::CallScope scope("Adds");
    sim::CheckScalarType<T, U>();
  }
  const float s = static_cast<float>(static_cast<T>(scalarValue));
  sim::Unary("Adds", dst, src, count, [s](float x) { return x + s; });
}
template <typename T, typename U>
void Muls(const LocalTensor<T>& dst, const LocalTensor<T>& src, const U& scalarValue, const int32_t& count) {
  {
    sim::CallScope scope("Muls");
    sim::CheckScalarType<T, U>();
  }
  const float s = static_cast<float>(static_cast<T>(scalarValue));
  sim::Unary("Muls", dst, src, count, [s](float x) { return x * s; });
}
template <typename T>
void Exp(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count) {
  sim::Unary("Exp", dst, src, count, [](float x) { return std::exp(x); });
}

template <typename T>
void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, const int32_t& count) {
  sim::CallScope scope("Duplicate");
  sim::VectorInstruction instruction;
  sim::CheckCount(count);
  sim::Operand(dst, count, sim::Access::Write, "dst");
  for (int32_t i = 0; i < count; ++i) dst.Raw()[i] = scalarValue;
  sim::CountVector<T>(count);
}

template <typename T, typename U>
void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& round_mode, const uint32_t count) {
  sim::CallScope scope("Cast");
  sim::VectorInstruction instruction;
  sim::CheckCount(count);
  sim::Operand(src, count, sim::Access::Read, "src");
  sim::Operand(dst, count, sim::Access::Write, "dst");
  sim::CheckOverlap(dst, count, src, count, "src");
  constexpr bool narrowing = sizeof(T) < sizeof(U);
  if (narrowing && round_mode == RoundMode::CAST_NONE && std::is_same<T, bfloat16_t>::value)
    sim::Fail("Cast float -> bfloat16_t needs an explicit round mode (CAST_NONE is not supported)");
  if (!narrowing && round_mode != RoundMode::CAST_NONE)
    sim::Fail("a widening Cast is exact: use CAST_NONE");
  for (uint32_t i = 0; i < count; ++i) {
    const float x = static_cast<float>(src.Raw()[i]);
    if constexpr (std::is_same<T, half>::value || std::is_same<T, bfloat16_t>::value)
      dst.Raw()[i] = sim::Saturate(sim::RoundTo<T>(x, round_mode), x);
    else
      dst.Raw()[i] = static_cast<T>(x);
  }
  sim::CountVector<typename std::conditional<(sizeof(T) > sizeof(U)), T, U>::type>(count);
}

// A2/A3 "first n elements" form: a binary tree within each 256-byte repeat, the repeats'
// results added in order. sharedTmpBuffer holds at least the first pass's results (one
// per repeat) rounded up to a 32-byte block, the documented minimum; it may overlap dst
// but neither may overlap src.
template <typename T, bool isSetMask = true>
void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer,
               const int32_t count) {
  sim::CallScope scope("ReduceSum");
  sim::VectorInstruction instruction;
  sim::CheckCount(count);
  sim::CheckArithmeticType<T>();
  const int32_t per_repeat = sim::Ctx().launch->soc->repeatBytes / sizeof(T);
  const int32_t per_block = sim::Ctx().launch->soc->blockBytes / sizeof(T);
  const int32_t repeats = (count + per_repeat - 1) / per_repeat;
  const int32_t scratch = (repeats + per_block - 1) / per_block * per_block;
  if (static_cast<int64_t>(sharedTmpBuffer.GetSize()) < scratch)
    sim::Fail("sharedTmpBuffer holds " + std::to_string(sharedTmpBuffer.GetSize()) + " elements; ReduceSum of " +
              std::to_string(count) + " needs at least " + std::to_string(scratch) +
              " (one per 256-byte repeat, rounded up to a 32-byte block)");
  sim::Operand(src, count, sim::Access::Read, "src");
  sim::Operand(sharedTmpBuffer, scratch, sim::Access::Write, "sharedTmpBuffer");
  dst.Check(0, 1, sim::Owner::Vector, sim::Access::Write, "ReduceSum");
  sim::CheckOverlap(dst, 1, src, count, "src");
  sim::CheckOverlap(sharedTmpBuffer, scratch, src, count, "src (with sharedTmpBuffer as dst)");
  float total = 0.0f;
  float lanes[128];
  for (int32_t r = 0; r < repeats; ++r) {
    const int32_t n = std::min(per_repeat, count - r * per_repeat);
    for (int32_t i = 0; i < per_repeat; ++i) lanes[i] = i < n ? static_cast<float>(src.Raw()[r * per_repeat + i]) : 0.0f;
    for (int32_t width = per_repeat / 2; width >= 1; width /= 2)
      for (int32_t i = 0; i < width; ++i) lanes[i] = static_cast<float>(T(lanes[2 * i] + lanes[2 * i + 1]));
    sharedTmpBuffer.Raw()[r] = T(lanes[0]);
    total = static_cast<float>(T(total + lanes[0]));
  }
  dst.Raw()[0] = T(total);
  sim::CountVector<T>(count);
}

}  // namespace AscendC
