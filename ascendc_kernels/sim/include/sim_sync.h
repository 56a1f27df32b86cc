// Synchronisation: within a core the simulator runs one pipe after another, so flags
// only have to pair up (a WaitFlag with no SetFlag before it would hang the hardware);
// across cores SyncAll is a real barrier over the launch's block threads.
#pragma once

#include "sim_runtime.h"

enum pipe_t { PIPE_S = 0, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_FIX };

namespace AscendC {

enum class HardEvent : uint8_t {
  MTE2_V = 0, V_MTE2, V_MTE3, MTE3_V, S_V, V_S, MTE2_S, S_MTE2, S_MTE3, MTE3_S, MTE2_MTE3, MTE3_MTE2
};

template <HardEvent event>
void SetFlag(int32_t eventID) {
  sim::CallScope scope("SetFlag");
  if (eventID < 0 || eventID >= 8) sim::Fail("eventID " + std::to_string(eventID) + " outside [0, 8)");
  ++sim::Ctx().flags[static_cast<int>(event)][eventID];
}

template <HardEvent event>
void WaitFlag(int32_t eventID) {
  sim::CallScope scope("WaitFlag");
  if (eventID < 0 || eventID >= 8) sim::Fail("eventID " + std::to_string(eventID) + " outside [0, 8)");
  int64_t& n = sim::Ctx().flags[static_cast<int>(event)][eventID];
  if (n <= 0) sim::Fail("WaitFlag with no matching SetFlag: the core would wait forever");
  --n;
}

template <pipe_t pipe>
void PipeBarrier() {}

template <bool isAIVOnly = true>
void SyncAll() {
  sim::CallScope scope("SyncAll");
  sim::SyncAllBlocks();
}

inline int64_t GetBlockIdx() { return sim::Ctx().block_idx; }
inline int64_t GetBlockNum() { return sim::Ctx().launch->block_dim; }

// GetUserWorkspace: see sim_workspace.h.

}  // namespace AscendC
