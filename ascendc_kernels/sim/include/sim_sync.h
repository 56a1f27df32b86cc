// Synchronisation. Within a core: SetFlag sends the source pipe's view to the matching
// WaitFlag, which orders the destination pipe after it (sim_pipes.h); a WaitFlag with no
// SetFlag before it would hang the hardware. Event IDs come from the pipe (TPipe's
// AllocEventID/FetchEventID, sim_tensor.h). Across cores SyncAll is a real barrier over
// the launch's block threads, allowed only in a kernel that declares a MIX kernel type
// and with no more blocks than the chip has cores.
#pragma once

#include <string>

#include "sim_runtime.h"

enum pipe_t { PIPE_S = 0, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_FIX };

// Kernel types (KERNEL_TASK_TYPE_DEFAULT): which cores a launch occupies.
enum KernelMetaType : int32_t {
  KERNEL_TYPE_AIV_ONLY = 0,
  KERNEL_TYPE_AIC_ONLY,
  KERNEL_TYPE_MIX_AIV_1_0,
  KERNEL_TYPE_MIX_AIC_1_0,
  KERNEL_TYPE_MIX_AIC_1_1,
  KERNEL_TYPE_MIX_AIC_1_2,
};

namespace AscendC {

using TEventID = int8_t;

// The documented values: X_Y means pipe Y waits for pipe X. The first twelve are the
// vector core's; the rest involve the cube core's MTE1 / M / FIX pipes.
enum class HardEvent : uint8_t {
  MTE2_V = 0, V_MTE2, V_MTE3, MTE3_V, S_V, V_S, MTE2_S, S_MTE2, S_MTE3, MTE3_S, MTE2_MTE3, MTE3_MTE2,
  MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, M_V, V_M, V_V, MTE3_MTE1, MTE1_MTE3, MTE1_V, MTE2_M, M_MTE2, V_MTE1,
  M_FIX, FIX_M, MTE2_FIX, FIX_MTE2, FIX_S, M_S, FIX_MTE3
};
static_assert(static_cast<int>(HardEvent::FIX_MTE3) + 1 == sim::kHardEvents, "one state slot per HardEvent");

}  // namespace AscendC

namespace sim {

// The (source, destination) pipes of a HardEvent: X_Y means Y waits for X.
struct EventPipes {
  Pipe src, dst;
  const char* name;
};

inline EventPipes PipesOf(AscendC::HardEvent e) {
  using H = AscendC::HardEvent;
  switch (e) {
    case H::MTE2_V: return {kPipeMte2, kPipeV, "MTE2_V"};
    case H::V_MTE2: return {kPipeV, kPipeMte2, "V_MTE2"};
    case H::V_MTE3: return {kPipeV, kPipeMte3, "V_MTE3"};
    case H::MTE3_V: return {kPipeMte3, kPipeV, "MTE3_V"};
    case H::S_V: return {kPipeS, kPipeV, "S_V"};
    case H::V_S: return {kPipeV, kPipeS, "V_S"};
    case H::MTE2_S: return {kPipeMte2, kPipeS, "MTE2_S"};
    case H::S_MTE2: return {kPipeS, kPipeMte2, "S_MTE2"};
    case H::S_MTE3: return {kPipeS, kPipeMte3, "S_MTE3"};
    case H::MTE3_S: return {kPipeMte3, kPipeS, "MTE3_S"};
    case H::MTE2_MTE3: return {kPipeMte2, kPipeMte3, "MTE2_MTE3"};
    case H::MTE3_MTE2: return {kPipeMte3, kPipeMte2, "MTE3_MTE2"};
    case H::MTE2_MTE1: return {kPipeMte2, kPipeMte1, "MTE2_MTE1"};
    case H::MTE1_MTE2: return {kPipeMte1, kPipeMte2, "MTE1_MTE2"};
    case H::MTE1_M: return {kPipeMte1, kPipeM, "MTE1_M"};
    case H::M_MTE1: return {kPipeM, kPipeMte1, "M_MTE1"};
    case H::M_V: return {kPipeM, kPipeV, "M_V"};
    case H::V_M: return {kPipeV, kPipeM, "V_M"};
    case H::V_V: return {kPipeV, kPipeV, "V_V"};
    case H::MTE3_MTE1: return {kPipeMte3, kPipeMte1, "MTE3_MTE1"};
    case H::MTE1_MTE3: return {kPipeMte1, kPipeMte3, "MTE1_MTE3"};
    case H::MTE1_V: return {kPipeMte1, kPipeV, "MTE1_V"};
    case H::MTE2_M: return {kPipeMte2, kPipeM, "MTE2_M"};
    case H::M_MTE2: return {kPipeM, kPipeMte2, "M_MTE2"};
    case H::V_MTE1: return {kPipeV, kPipeMte1, "V_MTE1"};
    case H::M_FIX: return {kPipeM, kPipeFix, "M_FIX"};
    case H::FIX_M: return {kPipeFix, kPipeM, "FIX_M"};
    case H::MTE2_FIX: return {kPipeMte2, kPipeFix, "MTE2_FIX"};
    case H::FIX_MTE2: return {kPipeFix, kPipeMte2, "FIX_MTE2"};
    case H::FIX_S: return {kPipeFix, kPipeS, "FIX_S"};
    case H::M_S: return {kPipeM, kPipeS, "M_S"};
    case H::FIX_MTE3: return {kPipeFix, kPipeMte3, "FIX_MTE3"};
  }
  return {kPipeS, kPipeS, "?"};
}

inline void CheckEventId(int32_t id) {
  if (id < 0 || id >= kEventIds) Fail("eventID " + std::to_string(id) + " outside [0, " + std::to_string(kEventIds) + ")");
}

inline const char* KernelTypeName(int32_t type) {
  switch (type) {
    case KERNEL_TYPE_AIV_ONLY: return "KERNEL_TYPE_AIV_ONLY";
    case KERNEL_TYPE_AIC_ONLY: return "KERNEL_TYPE_AIC_ONLY";
    case KERNEL_TYPE_MIX_AIV_1_0: return "KERNEL_TYPE_MIX_AIV_1_0";
    case KERNEL_TYPE_MIX_AIC_1_0: return "KERNEL_TYPE_MIX_AIC_1_0";
    case KERNEL_TYPE_MIX_AIC_1_1: return "KERNEL_TYPE_MIX_AIC_1_1";
    case KERNEL_TYPE_MIX_AIC_1_2: return "KERNEL_TYPE_MIX_AIC_1_2";
    default: return "no kernel type (KERNEL_TASK_TYPE_DEFAULT not called)";
  }
}

// KERNEL_TASK_TYPE_DEFAULT: the launch must run the cores the kernel declares. A vector
// launch may declare AIV_ONLY or MIX_AIV_1_0 (the type a hardware SyncAll needs); a MIX
// launch (AIC:AIV = 1:2) must declare MIX_AIC_1_2. Cube-only and the other MIX ratios
// are not modelled.
inline void DeclareKernelType(int32_t type) {
  CallScope scope("KERNEL_TASK_TYPE_DEFAULT");
  const bool mix = Ctx().launch->kind == LaunchKind::MixAic1To2;
  if (type == KERNEL_TYPE_MIX_AIC_1_2 && !mix)
    Fail("the kernel declares KERNEL_TYPE_MIX_AIC_1_2 but was launched on vector cores only");
  if (type == KERNEL_TYPE_MIX_AIC_1_1 || type == KERNEL_TYPE_MIX_AIC_1_0 || type == KERNEL_TYPE_AIC_ONLY)
    Fail(std::string("kernel type ") + KernelTypeName(type) +
         " is not modelled by the simulator (MIX 1:2 and vector kernels are)");
  if (type != KERNEL_TYPE_MIX_AIC_1_2 && mix)
    Fail(std::string("the launch runs AIC and AIV cores (MIX 1:2) but the kernel declares ") + KernelTypeName(type));
  if (type != KERNEL_TYPE_AIV_ONLY && type != KERNEL_TYPE_MIX_AIV_1_0 && type != KERNEL_TYPE_MIX_AIC_1_2)
    Fail("unknown kernel type " + std::to_string(type));
  Ctx().kernel_type = type;
}

}  // namespace sim

#define KERNEL_TASK_TYPE_DEFAULT(type) sim::DeclareKernelType(type)

namespace AscendC {

template <HardEvent event>
void SetFlag(int32_t eventID) {
  sim::CallScope scope("SetFlag");
  sim::CheckEventId(eventID);
  const sim::EventPipes e = sim::PipesOf(event);
  sim::PipeState& ps = sim::Ctx().pipes;
  const int ev = static_cast<int>(event);
  // With a TPipe, the framework's queues use event IDs too: a hard-coded ID may collide.
  // An ID is the pipe's while AllocEventID holds it; a FetchEventID answer covers the one
  // SetFlag that follows it (the ID was free then, not necessarily later).
  if (sim::Ctx().tpipe != nullptr && !((ps.allocated[ev] >> eventID) & 1u)) {
    if (!((ps.fetched[ev] >> eventID) & 1u))
      sim::Fail("eventID " + std::to_string(eventID) + " of HardEvent::" + e.name +
                " was not taken from the pipe: in TPipe/TQue kernels event IDs come from "
                "GetTPipePtr()->FetchEventID or AllocEventID, right before use (a hard-coded or "
                "stale ID can clash with the queues' IDs)");
    ps.fetched[ev] = static_cast<uint8_t>(ps.fetched[ev] & ~(1u << eventID));
  }
  ps.flags[ev][eventID].push_back(sim::PipeView(e.src));
}

template <HardEvent event>
void WaitFlag(int32_t eventID) {
  sim::CallScope scope("WaitFlag");
  sim::CheckEventId(eventID);
  auto& sent = sim::Ctx().pipes.flags[static_cast<int>(event)][eventID];
  if (sent.empty()) sim::Fail("WaitFlag with no matching SetFlag: the core would wait forever");
  sim::PipeMerge(sim::PipesOf(event).dst, sent.front());
  sent.erase(sent.begin());
}

template <pipe_t pipe>
void PipeBarrier() {
  if constexpr (pipe == PIPE_ALL) sim::PipeBarrierAll();
  if constexpr (pipe == PIPE_V) sim::PipeBarrierVector();  // rule G; other pipes order themselves here
}

// The hardware SyncAll: needs a MIX kernel type (a vector kernel declares
// KERNEL_TYPE_MIX_AIV_1_0), and blockDim no larger than the cores that run it at once
// (otherwise the framework schedules blocks in rounds and the first round waits forever).
template <bool isAIVOnly = true>
void SyncAll() {
  sim::CallScope scope("SyncAll");
  sim::BlockContext& c = sim::Ctx();
  const int32_t type = c.kernel_type;
  const bool mix = type == KERNEL_TYPE_MIX_AIV_1_0 || type == KERNEL_TYPE_MIX_AIC_1_0 ||
                   type == KERNEL_TYPE_MIX_AIC_1_1 || type == KERNEL_TYPE_MIX_AIC_1_2;
  if (!mix)
    sim::Fail(std::string("hardware SyncAll in a kernel of type ") + sim::KernelTypeName(type) +
              ": a vector kernel must declare KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0)");
  // In a MIX 1:2 launch blockDim counts AI cores, each running two vector cores.
  const bool mixLaunch = c.launch->kind == sim::LaunchKind::MixAic1To2;
  const uint32_t cores = isAIVOnly ? c.launch->soc->vectorCores : c.launch->soc->aiCores;
  const uint64_t needed = isAIVOnly && mixLaunch ? 2ull * c.launch->block_dim : c.launch->block_dim;
  if (needed > cores)
    sim::Fail("SyncAll with blockDim " + std::to_string(c.launch->block_dim) +
              (needed != c.launch->block_dim ? " (" + std::to_string(needed) + " vector cores)" : std::string()) +
              " > the " + std::to_string(cores) +
              (isAIVOnly ? " vector" : " AI") +
              " cores of the chip: blocks beyond them run in a later round and the first round waits forever");
  sim::SyncAllBlocks();
}

inline int64_t GetBlockIdx() { return sim::Ctx().block_idx; }
inline int64_t GetBlockNum() { return sim::Ctx().launch->block_dim; }

// GetUserWorkspace: see sim_workspace.h.

}  // namespace AscendC
