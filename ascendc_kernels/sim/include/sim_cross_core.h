// The cores of a MIX launch and their synchronisation: which core a block runs on
// (ASCEND_IS_AIC / ASCEND_IS_AIV, GetSubBlockIdx, GetTaskRatio), the kernel type a
// kernel declares (KERNEL_TASK_TYPE_DEFAULT), and CrossCoreSetFlag / CrossCoreWaitFlag
// as A2/A3 run them (flag ids 0..10). Every core has one counter per flag id; a wait
// (`wait_flag_dev(id)`, whatever its template arguments) blocks the core until its
// counter is positive and decrements it. A set is an instruction on the pipe it names and
// increments counters according to its mode:
//   mode 0: all cores of the setter's kind (every AIC, or every AIV of the launch): once
//           each of them has set, each one's counter goes up by one;
//   mode 1: the two AIVs of an AI core: once both have set, both counters go up;
//   mode 2: AIC <-> AIV within an AI core: an AIC set raises both AIVs' counters, and
//           once both AIVs have set, the AIC's counter goes up.
// Rules: a counter holds at most 15 sets not yet waited for (one more is an error, as are
// more than 15 unmatched sets of one core); the set's pipe must be one of the core's own
// (AIC: MTE1, MTE2, M, FIX; AIV: V, MTE2, MTE3; PIPE_S is Atlas 350 only), and the flag
// publishes only the GM accesses that pipe is ordered after (sim_race.h); a wait that
// can never be satisfied is raised as a hang naming every blocked core; a flag still set
// when the launch ends is raised too (the counters would leak into the next kernel).
#pragma once

#include <string>

#include "sim_runtime.h"
#include "sim_sync.h"

// The kernel types (KernelMetaType) and KERNEL_TASK_TYPE_DEFAULT live in sim_sync.h.

namespace sim {

inline bool IsAic() { return Ctx().core == CoreKind::Aic; }
inline bool IsMix() { return Ctx().launch->kind == LaunchKind::MixAic1To2; }

inline void RequireMix(const char* what) {
  if (!IsMix()) Fail(std::string(what) + " needs a MIX kernel (KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2)); "
                     "this launch runs vector cores only");
  if (Ctx().kernel_type < 0)
    Fail(std::string(what) + " before KERNEL_TASK_TYPE_DEFAULT: declare the MIX kernel type first");
}

inline void CheckFlagId(uint16_t id) {
  if (id >= kCrossCoreFlags)
    Fail("flagId " + std::to_string(id) + " outside [0, " + std::to_string(kCrossCoreFlags - 1) + "] (A2/A3)");
}

// The simulator's pipe for a CrossCoreSetFlag pipe argument, checked against the core.
Pipe CrossCoreSetPipe(int pipe);

// Adds one set to a counter (and its clock); fails past the hardware's 15.
void RaiseCounter(int64_t& counter, std::vector<VectorClock>& clocks, const VectorClock& token, const std::string& whose,
                  uint16_t id);

void CrossCoreSet(uint8_t mode, int pipe, uint16_t id);
void CrossCoreWait(uint16_t id);

}  // namespace sim

// In CANN these read the core type the binary section runs on; usage: `if ASCEND_IS_AIC { ... }`.
#define ASCEND_IS_AIC (sim::IsAic())
#define ASCEND_IS_AIV (!sim::IsAic())

namespace AscendC {

template <uint8_t modeId, pipe_t pipe>
void CrossCoreSetFlag(uint16_t flagId) {
  sim::CrossCoreSet(modeId, static_cast<int>(pipe), flagId);
}

// On A2/A3 the wait ignores its template arguments (the hardware waits on the core's counter).
template <uint8_t modeId = 0, pipe_t pipe = PIPE_S>
void CrossCoreWaitFlag(uint16_t flagId) {
  sim::CrossCoreWait(flagId);
}

inline uint8_t GetSubBlockIdx() { return static_cast<uint8_t>(sim::Ctx().sub_block); }
// AIV cores per AIC in this launch: 2 on the AIV side of a MIX 1:2 launch, else 1.
inline int64_t GetTaskRatio() { return sim::IsMix() && !sim::IsAic() ? 2 : 1; }

}  // namespace AscendC
