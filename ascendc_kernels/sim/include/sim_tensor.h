// GlobalTensor, LocalTensor, TPipe, TQue and TBuf with the official signatures, and the
// bookkeeping that makes misuse an error: every queue buffer has an owner (the pipe that
// may touch it: MTE2 fills VECIN, V computes, MTE3 drains VECOUT) that only
// AllocTensor / EnQue / DeQue / FreeTensor change.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "sim_dtypes.h"
#include "sim_runtime.h"
#include "sim_sync.h"

#define __aicore__
#define __global__
#define __gm__
#define GM_ADDR uint8_t*

namespace AscendC {

enum class TPosition : uint8_t { GM, VECIN, VECOUT, VECCALC, A1, B1, A2, B2, CO1, CO2 };
using QuePosition = TPosition;

}  // namespace AscendC

namespace sim {

enum class Owner : uint8_t { None, Mte2, Vector, Mte3, Freed, Scalar };

// The pipe an access runs on (the scalar unit may touch what the vector side holds).
inline Pipe PipeOfOwner(Owner o) {
  return o == Owner::Mte2 ? kPipeMte2 : o == Owner::Mte3 ? kPipeMte3 : o == Owner::Scalar ? kPipeS : kPipeV;
}

inline const char* OwnerName(Owner o) {
  switch (o) {
    case Owner::None: return "no pipe (enqueued)";
    case Owner::Mte2: return "MTE2 (allocated, not yet EnQue'd/DeQue'd)";
    case Owner::Vector: return "the vector pipe";
    case Owner::Mte3: return "MTE3 (DeQue'd for copy-out)";
    case Owner::Freed: return "nobody (freed by FreeTensor)";
    case Owner::Scalar: return "the scalar unit";
  }
  return "?";
}

// One buffer of a TQue. `generation` changes on every AllocTensor, so a LocalTensor kept
// after FreeTensor is recognised as stale even when the buffer is allocated again.
struct QueSlot {
  uint64_t offset = 0;  // in UB
  uint32_t bytes = 0;
  uint64_t generation = 0;
  Owner owner = Owner::Freed;
  bool in_queue = false;
  PipeClock released{};  // the view EnQue (producer) or FreeTensor (consumer) handed over
  int8_t enque_id = -1;  // the event ID its EnQue holds until DeQue
  int8_t free_id = -1;   // the event ID its FreeTensor holds until the next AllocTensor
};

// Rule C. A queue's EnQue takes an ID of its enqueue HardEvent from the pipe's pool and
// DeQue gives it back; FreeTensor takes one of its free HardEvent, which the buffer's next
// AllocTensor gives back (asc-devkit v9.0.0 kernel_tquebind_impl.h: EnQue :196-201, DeQue
// :328-340, FreeBuffer :439-440, AllocBuffer :502-505). A pool holds QUE_MAX_EVENT = 8 IDs
// per HardEvent on A2/A3 (kernel_macros.h :111-114; TPipe::AllocEventID asserts it,
// kernel_tpipe_impl.h :449-459), shared with the kernel's own AllocEventID/FetchEventID.
constexpr int kQueMaxEvent = 8;  // QUE_MAX_EVENT on __NPU_ARCH__ 2201

inline int8_t TakeQueueEventId(AscendC::HardEvent event, const char* why) {
  PipeState& ps = Ctx().pipes;
  const int e = static_cast<int>(event);
  for (int id = 0; id < kQueMaxEvent; ++id)
    if (!(((ps.allocated[e] | ps.queue_held[e]) >> id) & 1u)) {
      ps.queue_held[e] = static_cast<uint8_t>(ps.queue_held[e] | (1u << id));
      return static_cast<int8_t>(id);
    }
  Fail(std::string(why) + " needs an event ID of HardEvent::" + PipesOf(event).name + ", and all " +
       std::to_string(kQueMaxEvent) + " are held: each tensor a queue holds EnQue'd (and each buffer freed and not "
       "yet allocated again) keeps one until its DeQue (AllocTensor), and the kernel's AllocEventID takes from the "
       "same 8 per HardEvent (asc-devkit kernel_tquebind_impl.h EnQue/FreeBuffer, QUE_MAX_EVENT = 8 on A2/A3): "
       "DeQue some first, or use fewer buffers of this position (rule C)");
}

inline void GiveQueueEventId(AscendC::HardEvent event, int8_t id) {
  if (id < 0) return;
  uint8_t& held = Ctx().pipes.queue_held[static_cast<int>(event)];
  held = static_cast<uint8_t>(held & ~(1u << id));
}

enum class Access : uint8_t { Read, Write };

}  // namespace sim

namespace AscendC {

template <typename T>
class LocalTensor {
 public:
  LocalTensor() = default;

  // Element access from the scalar unit.
  T GetValue(uint32_t index) const {
    Check(index, 1, sim::Owner::Scalar, sim::Access::Read, "LocalTensor::GetValue");
    return data_[index];
  }
  void SetValue(uint32_t index, T value) const {
    Check(index, 1, sim::Owner::Scalar, sim::Access::Write, "LocalTensor::SetValue");
    data_[index] = value;
  }
  LocalTensor operator[](uint32_t offset) const {
    if (offset > size_) {
      sim::CallScope scope("LocalTensor::operator[]");
      sim::Fail("offset " + std::to_string(offset) + " beyond the tensor's " + std::to_string(size_) + " elements");
    }
    LocalTensor t = *this;
    t.data_ += offset;
    t.size_ -= offset;
    return t;
  }
  uint32_t GetSize() const { return size_; }
  uint64_t GetPhyAddr() const { return reinterpret_cast<uint64_t>(data_); }
  template <typename U>
  LocalTensor<U> ReinterpretCast() const {
    LocalTensor<U> t;
    t.data_ = reinterpret_cast<U*>(data_);
    t.size_ = static_cast<uint32_t>(uint64_t(size_) * sizeof(T) / sizeof(U));
    t.slot_ = slot_;
    t.generation_ = generation_;
    t.pos_ = pos_;
    return t;
  }

  // --- simulator internals (not AscendC API) ---
  // Checks that [index, index + count) lies in the tensor, that `pipe` may access it, and
  // that the access is ordered after the other pipes' accesses to the same UB (sim_pipes.h).
  void Check(uint64_t index, uint64_t count, sim::Owner pipe, sim::Access access, const char* call) const {
    sim::CallScope scope(call);
    if (data_ == nullptr) sim::Fail("LocalTensor used before it was allocated");
    if (index + count > size_) {
      std::ostringstream s;
      s << "elements [" << index << ", " << index + count << ") exceed the operand's " << size_
        << " elements";
      sim::Fail(s.str());
    }
    if (slot_ != nullptr) CheckSlot(pipe, access);
    sim::PipeAccess(sim::PipeOfOwner(pipe), data_ + index, count * sizeof(T), access == sim::Access::Write);
  }
  void CheckSlot(sim::Owner pipe, sim::Access access) const {
    if (slot_->generation != generation_ || slot_->owner == sim::Owner::Freed)
      sim::Fail("LocalTensor accessed after FreeTensor");
    if (slot_->in_queue) sim::Fail("LocalTensor accessed while enqueued (call DeQue first)");
    const sim::Owner as = pipe == sim::Owner::Scalar ? sim::Owner::Vector : pipe;  // S works on V's tensors
    if (slot_->owner != as) {
      const char* verb = access == sim::Access::Read ? "read" : "written";
      std::string hint = pos_ == TPosition::VECIN && pipe == sim::Owner::Vector
                             ? " (read before EnQue/DeQue)"
                         : pos_ == TPosition::VECOUT && pipe == sim::Owner::Mte3
                             ? " (copied out before EnQue/DeQue)"
                             : "";
      sim::Fail(std::string("LocalTensor ") + verb + " by " +
                (pipe == sim::Owner::Vector ? "the vector pipe"
                 : pipe == sim::Owner::Scalar ? "the scalar unit"
                 : pipe == sim::Owner::Mte2  ? "MTE2"
                                             : "MTE3") +
                " while owned by " + sim::OwnerName(slot_->owner) + hint);
    }
  }
  T* Raw() const { return data_; }
  TPosition Position() const { return pos_; }
  sim::QueSlot* Slot() const { return slot_; }
  uint64_t Generation() const { return generation_; }
  static LocalTensor Make(T* data, uint32_t size, sim::QueSlot* slot, uint64_t gen, TPosition pos) {
    LocalTensor t;
    t.data_ = data; t.size_ = size; t.slot_ = slot; t.generation_ = gen; t.pos_ = pos;
    return t;
  }

 private:
  template <typename U> friend class LocalTensor;
  T* data_ = nullptr;
  uint32_t size_ = 0;
  sim::QueSlot* slot_ = nullptr;
  uint64_t generation_ = 0;
  TPosition pos_ = TPosition::VECCALC;
};

template <typename T>
class GlobalTensor {
 public:
  GlobalTensor() = default;
  void SetGlobalBuffer(__gm__ T* buffer, uint64_t bufferSize = 0) {
    sim::CallScope scope("GlobalTensor::SetGlobalBuffer");
    auto* p = reinterpret_cast<const uint8_t*>(buffer);
    const uint8_t* region_end = sim::CheckGm(p, bufferSize * sizeof(T), "SetGlobalBuffer");
    data_ = buffer;
    size_ = bufferSize != 0 ? bufferSize : static_cast<uint64_t>(region_end - p) / sizeof(T);
  }
  GlobalTensor operator[](uint64_t offset) const {
    if (offset > size_) {
      sim::CallScope scope("GlobalTensor::operator[]");
      sim::Fail("offset " + std::to_string(offset) + " beyond the GlobalTensor's " + std::to_string(size_) + " elements");
    }
    GlobalTensor t = *this;
    t.data_ += offset;
    t.size_ -= offset;
    return t;
  }
  T GetValue(uint64_t index) const {
    Check(index, 1, "GlobalTensor::GetValue");
    sim::Ctx().counters.gm_read_bytes += sim::GmSectorBytes(data_ + index, sizeof(T));
    return data_[index];
  }
  void SetValue(uint64_t index, const T& value) {
    Check(index, 1, "GlobalTensor::SetValue");
    sim::Ctx().counters.gm_write_bytes += sim::GmSectorBytes(data_ + index, sizeof(T));
    data_[index] = value;
  }
  uint64_t GetSize() const { return size_; }
  __gm__ T* GetPhyAddr() const { return data_; }

  // --- simulator internals ---
  // Checks [index, index + count) against this tensor's size and the launch's GM regions,
  // and records the access (one burst).
  void Check(uint64_t index, uint64_t count, const char* call) const {
    CheckBounds(index, count, call);
    sim::CallScope scope(call);  // the call names the access's direction and pipe (sim_race.h)
    sim::CheckGm(data_ + index, count * sizeof(T), "GM access");
  }
  // The size check alone: a strided copy records each of its bursts itself.
  void CheckBounds(uint64_t index, uint64_t count, const char* call) const {
    sim::CallScope scope(call);
    if (data_ == nullptr) sim::Fail("GlobalTensor used before SetGlobalBuffer");
    if (index + count > size_) {
      std::ostringstream s;
      s << "GM elements [" << index << ", " << index + count << ") exceed the GlobalTensor's " << size_
        << " elements";
      sim::Fail(s.str());
    }
  }
  T* Raw() const { return data_; }

 private:
  T* data_ = nullptr;
  uint64_t size_ = 0;
};

class TPipe;

// A queue of `depth` in-flight tensors over the buffers InitBuffer gave it.
template <TPosition pos, int32_t depth>
class TQue {
 public:
  TQue() = default;
  TQue(const TQue&) = delete;
  ~TQue() {
    if (!sim::InKernel()) return;
    int outstanding = 0;
    for (const auto& s : slots_) outstanding += s.owner != sim::Owner::Freed;
    if (outstanding) {
      sim::CallScope scope("kernel end");
      sim::Defer(std::string("unbalanced AllocTensor/FreeTensor: a ") + PositionName() + " queue ends with " +
                 std::to_string(outstanding) + " tensor(s) not freed");
    }
  }

  template <typename T>
  LocalTensor<T> AllocTensor() {
    sim::CallScope scope("TQue::AllocTensor");
    if (slots_.empty()) sim::Fail("queue has no buffers: call TPipe::InitBuffer first");
    for (auto& s : slots_) {
      if (s.owner == sim::Owner::Freed) {
        sim::GiveQueueEventId(FreeEvent(), s.free_id);  // the AllocTensor waits for its FreeTensor's event
        s.free_id = -1;
        ++s.generation;
        s.owner = pos == TPosition::VECIN ? sim::Owner::Mte2 : sim::Owner::Vector;
        s.in_queue = false;
        sim::PipeMerge(Producer(), s.released);  // waits for the previous user's FreeTensor
        auto* data = reinterpret_cast<T*>(sim::Ctx().ub.data() + s.offset);
        return LocalTensor<T>::Make(data, s.bytes / sizeof(T), &s, s.generation, pos);
      }
    }
    sim::Fail(std::string("queue used beyond its depth: all ") + std::to_string(slots_.size()) + " buffers of the " +
              PositionName() + " queue are allocated (FreeTensor one first)");
  }

  template <typename T>
  bool EnQue(const LocalTensor<T>& tensor) {
    sim::CallScope scope("TQue::EnQue");
    sim::QueSlot* s = Own(tensor);
    if (s->in_queue) sim::Fail("tensor EnQue'd twice");
    if (static_cast<int32_t>(fifo_.size()) >= depth)
      sim::Fail("queue used beyond its depth " + std::to_string(depth) + ": EnQue on a full queue");
    s->enque_id = sim::TakeQueueEventId(EnqueEvent(), "TQue::EnQue");
    s->in_queue = true;
    s->owner = sim::Owner::None;
    s->released = sim::PipeView(Producer());
    fifo_.push_back(s);
    return true;
  }

  template <typename T>
  LocalTensor<T> DeQue() {
    sim::CallScope scope("TQue::DeQue");
    if (fifo_.empty()) sim::Fail("DeQue on an empty queue (nothing was EnQue'd)");
    sim::QueSlot* s = fifo_.front();
    fifo_.erase(fifo_.begin());
    s->in_queue = false;
    sim::GiveQueueEventId(EnqueEvent(), s->enque_id);
    s->enque_id = -1;
    s->owner = pos == TPosition::VECIN ? sim::Owner::Vector : sim::Owner::Mte3;
    sim::PipeMerge(Consumer(), s->released);
    auto* data = reinterpret_cast<T*>(sim::Ctx().ub.data() + s->offset);
    return LocalTensor<T>::Make(data, s->bytes / sizeof(T), s, s->generation, pos);
  }

  template <typename T>
  void FreeTensor(LocalTensor<T>& tensor) {
    sim::CallScope scope("TQue::FreeTensor");
    sim::QueSlot* s = Own(tensor);
    if (s->in_queue) sim::Fail("FreeTensor on a tensor still enqueued");
    s->free_id = sim::TakeQueueEventId(FreeEvent(), "TQue::FreeTensor");
    s->owner = sim::Owner::Freed;
    s->released = sim::PipeView(Consumer());
  }

  // --- simulator internals ---
  void Init(uint8_t num, uint32_t len, uint64_t first_offset, uint32_t aligned_len) {
    slots_.assign(num, sim::QueSlot{});
    for (uint8_t i = 0; i < num; ++i) {
      slots_[i].offset = first_offset + uint64_t(i) * aligned_len;
      slots_[i].bytes = len;
    }
  }
  bool Initialised() const { return !slots_.empty(); }

 private:
  // VECIN: MTE2 fills, V consumes; VECOUT: V fills, MTE3 drains; VECCALC: V both.
  static sim::Pipe Producer() { return pos == TPosition::VECIN ? sim::kPipeMte2 : sim::kPipeV; }
  static sim::Pipe Consumer() { return pos == TPosition::VECOUT ? sim::kPipeMte3 : sim::kPipeV; }
  static const char* PositionName() {
    return pos == TPosition::VECIN ? "VECIN" : pos == TPosition::VECOUT ? "VECOUT" : "VECCALC";
  }
  // The HardEvents of a TQue (asc-devkit GetQueEvt): VECIN is GM -> UB (MTE2_V, freed
  // V_MTE2), VECOUT UB -> GM (V_MTE3, freed MTE3_V).
  static HardEvent EnqueEvent() { return pos == TPosition::VECIN ? HardEvent::MTE2_V : HardEvent::V_MTE3; }
  static HardEvent FreeEvent() { return pos == TPosition::VECIN ? HardEvent::V_MTE2 : HardEvent::MTE3_V; }
  template <typename T>
  sim::QueSlot* Own(const LocalTensor<T>& t) {
    sim::QueSlot* s = t.Slot();
    bool mine = false;
    for (auto& own : slots_) mine |= (&own == s);
    if (!mine) sim::Fail("tensor does not belong to this queue");
    if (s->generation != t.Generation() || s->owner == sim::Owner::Freed)
      sim::Fail("tensor was already freed (FreeTensor twice or a stale LocalTensor)");
    return s;
  }
  std::vector<sim::QueSlot> slots_;
  std::vector<sim::QueSlot*> fifo_;
};

// Scratch memory with no queue discipline: any pipe may use it, and the pipe model
// (sim_pipes.h) checks that its users synchronise.
template <TPosition pos = TPosition::VECCALC>
class TBuf {
 public:
  template <typename T>
  LocalTensor<T> Get() const { return Get<T>(bytes_ / sizeof(T)); }
  template <typename T>
  LocalTensor<T> Get(uint32_t len) const {
    sim::CallScope scope("TBuf::Get");
    if (bytes_ == 0) sim::Fail("TBuf has no memory: call TPipe::InitBuffer first");
    if (uint64_t(len) * sizeof(T) > bytes_)
      sim::Fail("TBuf::Get of " + std::to_string(len) + " elements exceeds its " + std::to_string(bytes_) + " bytes");
    auto* data = reinterpret_cast<T*>(sim::Ctx().ub.data() + offset_);
    return LocalTensor<T>::Make(data, len, nullptr, 0, pos);
  }
  void Init(uint64_t offset, uint32_t bytes) { offset_ = offset; bytes_ = bytes; }

 private:
  uint64_t offset_ = 0;
  uint32_t bytes_ = 0;
};

enum class HardEvent : uint8_t;  // sim_sync.h
using TEventID = int8_t;

// Hands out UB: every buffer is rounded up to 32 bytes, and the total may not exceed the
// core's UB.
class TPipe {
 public:
  TPipe() {
    if (sim::InKernel()) sim::Ctx().tpipe = this;
  }
  TPipe(const TPipe&) = delete;
  ~TPipe() {
    if (!sim::InKernel()) return;
    sim::BlockContext& c = sim::Ctx();
    if (c.tpipe == this) c.tpipe = nullptr;
    for (int e = 0; e < sim::kHardEvents; ++e)
      if (c.pipes.allocated[e]) {
        sim::CallScope scope("kernel end");
        sim::Defer(std::string("AllocEventID without ReleaseEventID (HardEvent::") +
                   sim::PipesOf(static_cast<HardEvent>(e)).name + ")");
        return;
      }
  }

  // Event IDs (A2/A3: 0..7 per HardEvent). AllocEventID reserves one until ReleaseEventID;
  // FetchEventID names one that is free now without reserving it.
  template <HardEvent evt>
  TEventID AllocEventID() {
    sim::CallScope scope("TPipe::AllocEventID");
    uint8_t& taken = sim::Ctx().pipes.allocated[static_cast<int>(evt)];
    const uint8_t queues = sim::Ctx().pipes.queue_held[static_cast<int>(evt)];
    for (int id = 0; id < sim::kEventIds; ++id)
      if (!(((taken | queues) >> id) & 1u)) {
        taken = static_cast<uint8_t>(taken | (1u << id));
        return static_cast<TEventID>(id);
      }
    sim::Fail(std::string("all event IDs of HardEvent::") + sim::PipesOf(evt).name +
              " are allocated (by AllocEventID or held by the queues' EnQue/FreeTensor)");
  }
  template <HardEvent evt>
  void ReleaseEventID(TEventID id) {
    sim::CallScope scope("TPipe::ReleaseEventID");
    sim::CheckEventId(id);
    uint8_t& taken = sim::Ctx().pipes.allocated[static_cast<int>(evt)];
    if (!((taken >> id) & 1u))
      sim::Fail("ReleaseEventID of event ID " + std::to_string(id) + " that AllocEventID did not hand out");
    taken = static_cast<uint8_t>(taken & ~(1u << id));
  }
  template <HardEvent evt>
  TEventID FetchEventID() { return FetchEventID(evt); }
  TEventID FetchEventID(HardEvent evt) {
    sim::CallScope scope("TPipe::FetchEventID");
    sim::PipeState& ps = sim::Ctx().pipes;
    const int e = static_cast<int>(evt);
    for (int id = 0; id < sim::kEventIds; ++id)
      if (!(((ps.allocated[e] | ps.queue_held[e]) >> id) & 1u)) {
        ps.fetched[e] = static_cast<uint8_t>(ps.fetched[e] | (1u << id));
        return static_cast<TEventID>(id);
      }
    sim::Fail(std::string("no free event ID of HardEvent::") + sim::PipesOf(evt).name);
  }

  template <TPosition pos, int32_t depth>
  bool InitBuffer(TQue<pos, depth>& que, uint8_t num, uint32_t len) {
    sim::CallScope scope("TPipe::InitBuffer");
    if (que.Initialised()) sim::Fail("queue initialised twice");
    if (num == 0 || num > kQbufMaxLen)
      sim::Fail("num " + std::to_string(num) + " outside [1, QBUF_MAX_LEN = " + std::to_string(kQbufMaxLen) +
                "] (asc-devkit kernel_tpipe_impl.h:225, ASCENDC_CHECK_VALUE_RANGE(num, 1, QBUF_MAX_LEN); rule B)");
    if (len == 0) sim::Fail("InitBuffer needs len >= 1");
    CountBuffers(num);
    const uint32_t aligned = Align(len);
    que.Init(num, len, Take(uint64_t(num) * aligned), aligned);
    return true;
  }
  template <TPosition pos>
  bool InitBuffer(TBuf<pos>& buf, uint32_t len) {
    sim::CallScope scope("TPipe::InitBuffer");
    if (len == 0) sim::Fail("InitBuffer needs len >= 1");
    CountBuffers(1);  // a TBuf is one buffer handle
    buf.Init(Take(Align(len)), len);
    return true;
  }

 private:
  // QBUF_MAX_LEN (asc-devkit impl/basic_api/kernel_macros.h:66-67): the buffers one TPipe
  // manages, every InitBuffer's num (a TBuf counts one) added up (kernel_tpipe_impl.h
  // :288-292, :353-357).
  static constexpr uint32_t kQbufMaxLen = 64;
  void CountBuffers(uint32_t num) {
    buffers_ += num;
    if (buffers_ > kQbufMaxLen)
      sim::Fail("the TPipe now manages " + std::to_string(buffers_) + " buffers, more than QBUF_MAX_LEN = " +
                std::to_string(kQbufMaxLen) + " (asc-devkit kernel_tpipe_impl.h:288-292: every InitBuffer's num "
                "adds up, a TBuf counts one; rule B)");
  }
  uint32_t buffers_ = 0;

  static uint32_t Align(uint32_t len) {
    const uint32_t b = sim::Ctx().launch->soc->blockBytes;
    return (len + b - 1) / b * b;
  }
  uint64_t Take(uint64_t bytes) {
    sim::BlockContext& c = sim::Ctx();
    const uint64_t capacity = c.launch->soc->ubBytes;
    if (c.ub_used + bytes > capacity) {
      std::ostringstream s;
      s << "UB overflow: " << c.ub_used << " bytes in use + " << bytes << " requested > " << capacity
        << " bytes of UB";
      sim::Fail(s.str());
    }
    const uint64_t offset = c.ub_used;
    c.ub_used += bytes;
    c.counters.ub_high_water = std::max(c.counters.ub_high_water, c.ub_used);
    return offset;
  }
};

// Data-cache control (AscendC docs 6.2.3.8.2; asc-devkit kernel_reg.h): the line that holds
// `dst`'s first element (SINGLE_CACHE_LINE) or every line of the core (ENTIRE_DATA_CACHE)
// is written back to GM and dropped. What GlobalTensor::SetValue wrote reaches GM only
// then (rules A and E, src/runtime.cpp).
enum class CacheLine : uint64_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE };
enum class DcciDst : uint64_t { CACHELINE_ALL = 0, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };

template <typename T, CacheLine entireType, DcciDst dcciDst>
void DataCacheCleanAndInvalid(const GlobalTensor<T>& dst) {
  sim::CallScope scope("DataCacheCleanAndInvalid");
  static_assert(dcciDst != DcciDst::CACHELINE_UB, "simulator: DataCacheCleanAndInvalid for UB is not modelled");
  sim::CleanDataCacheLine(dst.GetPhyAddr(), entireType == CacheLine::ENTIRE_DATA_CACHE);
}

template <typename T, CacheLine entireType>
void DataCacheCleanAndInvalid(const GlobalTensor<T>& dst) {
  DataCacheCleanAndInvalid<T, entireType, DcciDst::CACHELINE_OUT>(dst);
}

// The block's TPipe (CANN keeps a global pointer to the pipe the kernel constructed).
inline TPipe* GetTPipePtr() {
  sim::CallScope scope("GetTPipePtr");
  if (sim::Ctx().tpipe == nullptr) sim::Fail("GetTPipePtr before a TPipe was constructed");
  return static_cast<TPipe*>(sim::Ctx().tpipe);
}

}  // namespace AscendC
